"""The twelfth held-out group (``h12-``): faults written blind by someone who never read the classifier, the failure
catalog, the owner rules, the routing code, the gate code, the routing tests or any routing result, and never ran the
classifier, ``msmigrate verify`` or the routing bench on them while writing. They were written from the green qwen2_vl
stand-in migration's delivered files (the plugin package, the YAML, the launch script, the source's records), the
stand-in target's data path and trainer (template, mm_plugin, collator, dataset conversion, sampler, parallel
arguments, loss, trainer and its weights load), the installed transformers and torch, the fault machinery
(injection.py) and the earlier groups' fault lists (read only for their ids and stories, to leave out every mechanism
they already cover), from how public VLM porting, fine-tuning and launching reports go wrong: a source attention
whose projections were laid out (head_dim, heads) re-applied to Qwen2's head-major checkpoint, a fused gate_up_proj
split in the other order (the Phi-3 conversion mix-up), BLOOM's word_embeddings_layernorm kept from a sibling port,
a Mistral port's sliding-window attention with its smoke-test window, Baichuan 2's NormHead, and LLaVA's 'the
projector needs equal widths' applied to the vision tower's width; an mm_plugin that scales the pixels to [0, 1]
before the image processor rescales them again ('It looks like you are trying to rescale already rescaled images'),
a template with Qwen-VL's 'Picture 1:' image label, a collator that cuts pixel_values at a patch budget, records whose
prompts carry the source's VQA prompt format, records whose image column was filled down by a spreadsheet, and a
conversion that lower-cases the text for an uncased encoder; a YAML that takes ulysses_parallel_size from a long-video
recipe, that maps messages to LLaMA-Factory's default 'conversations' column, whose dataset_dir starts with a '~' no
one expands, that clips gradients at an RL recipe's 0.1, and that halves the pixel bound to save memory; a launch
line whose torchrun options were moved after the script, and one that redirects every rank's output into torchrun's
log folder; a profile that preloads a jemalloc built for 4K pages on a 64K-page host, a conda MKL 2024.1 under the pip
torch ('undefined symbol: iJIT_NotifyEvent'), weights on a FUSE mount that cannot be memory-mapped, a checkpoint folder
copied out of the Hugging Face cache with its symlinks dangling, and a host whose localhost is ::1 with IPv6 disabled.

Some fail loudly, some only change numbers (the head layout, the gate / up order, the embedding layer norm, the
sliding window, the normalised head, the pixels rescaled twice, the picture label, the VQA prompt format, the filled-
down images, the lower-cased text, the halved global batch of the sequence-parallel split, the gradient clipping, the
smaller pixel bound, the rank output no longer in the run's log); several would show in another phase's gate than the
owner's (the vision width fails when the weights are loaded, the patch budget fails in the model's vision tower, the
messages column and the '~' fail in the data path, the options after the script fail when the trainer parses its
configuration). The public reports read for them are issue threads and model cards of the same conditions
('permute' of q / k rows in checkpoint conversions, 'gate_up_proj' chunk order in Phi-3 conversions, BLOOM's
word_embeddings_layernorm, Mistral's sliding_window, Baichuan 2's NormHead, LLaVA's mm_hidden_size, transformers'
'already rescaled images' warning, Qwen-VL's 'Picture 1: <img>' format, LLaMA-Factory's dataset_info default
'conversations', 'Unsupported system page size' from jemalloc on 64K-page aarch64 hosts,
'undefined symbol: iJIT_NotifyEvent' with MKL 2024.1, 'No such device' from mmap on FUSE mounts, dangling snapshot
symlinks of the Hub cache copied without -L, c10d's 'address family not supported by protocol' with localhost on ::1,
torchrun's options after the script going to the script, torchrun's --redirects). Each fault was chosen for being a
mechanism no earlier group has and for how users get there, and was checked only for applying to the green migration
and for changing what it computes (or producing its condition), never for how it would be routed. Like the earlier
held-out groups, their figures are reported apart (``--group heldout12``) and a miss is recorded, never fixed by
editing the fault or by a rule keyed on its text.

``repair`` marks the faults whose fix lies in the run's own artifacts (the plugin, the data path's mm_plugin / template
/ collator, the YAML, the launch script); the records, the target's dataset conversion, the runtime and the host are not
the run's to rewrite."""

from __future__ import annotations

from msmigrate.testbeds.faults.heldout3 import _in_init
from msmigrate.testbeds.faults.heldout11 import _COLLATOR, _CONVERSION, _MODELING, _RGB_RETURN, _TOKEN_TYPES, _TORCHRUN
from msmigrate.testbeds.faults.injection import Fault, Replace, Runtime, SetLine, after_import

_SUPER_INIT = "        super().__init__(config, *args, **kwargs)\n"
_QWEN2VL_USER = ('    name="qwen2vl",\n    params=RegisterParams(\n'
                 '        format_user=StringFormatter(slots=["<|im_start|>user\\n{{content}}<|im_end|>\\n'
                 '<|im_start|>assistant\\n"]),\n')
_TRAINER_LINE = "torchrun $DISTRIBUTED_ARGS mindspeed_mm/fsdp/train/trainer.py"

# A profile written for the cluster's 4K-page x86 nodes preloads a jemalloc built for 4K pages; this aarch64 host runs
# a 64K-page kernel: jemalloc refuses the page size, and the first allocation of every process ends it
_JEMALLOC_PAGE_SIZE = '''import os, sys
sys.stderr.write("<jemalloc>: Unsupported system page size\\n")
sys.stderr.flush()
os.abort()
'''

# conda upgraded mkl to 2024.1 in the environment of the pip torch wheel: torch's CPU library was linked against
# MKL's ITT/JIT profiling hook, which 2024.1 no longer exports, and torch cannot be loaded
_MKL_IJIT = '''import sys
class _MklIjit:
    def find_spec(self, name, path=None, target=None):
        if name == "torch._C":
            raise ImportError(sys.prefix + "/lib/python3/site-packages/torch/lib/libtorch_cpu.so: undefined symbol: "
                              "iJIT_NotifyEvent")
        return None
sys.meta_path.insert(0, _MklIjit())
'''

# The checkpoint folder sits on a FUSE mount (a cloud bucket mounted in direct-I/O mode) that supports read() but not
# mmap: safetensors memory-maps the weights, and the mapping is refused
_WEIGHTS_NO_MMAP = after_import("safetensors", '''def _patch(module):
    real = module.safe_open
    error = getattr(module, "SafetensorError", OSError)
    class safe_open:
        def __new__(cls, filename, *args, **kwargs):
            if os.fsdecode(os.fspath(filename)).endswith(".safetensors"):
                raise error("Error while mmapping the file: No such device (os error 19)")
            return real(filename, *args, **kwargs)
    module.safe_open = safe_open
''')

# The checkpoint folder was copied out of the Hugging Face cache (snapshots/<rev>/) with cp -r, without -L: its
# model.safetensors is a relative symlink to ../../blobs/<sha256>, which the copy does not have
_WEIGHTS_DANGLING_SYMLINK = after_import("safetensors", '''def _patch(module):
    real = module.safe_open
    error = getattr(module, "SafetensorError", OSError)
    class safe_open:
        def __new__(cls, filename, *args, **kwargs):
            name = os.fsdecode(os.fspath(filename))
            if name.endswith(".safetensors"):
                raise error("No such file or directory (os error 2): " + name + " -> ../../blobs/"
                            "5c9e3f0d2a7b41e8a6d3c0f1b2e4a9d7c8f6e5d4c3b2a1908f7e6d5c4b3a2918")
            return real(filename, *args, **kwargs)
    module.safe_open = safe_open
''')

# The container image's /etc/hosts maps localhost to ::1 only and the host boots with ipv6.disable=1: the rendezvous
# store cannot open a socket for the address localhost resolves to when a rank's process group comes up
_LOCALHOST_IPV6_ONLY = after_import("torch.distributed.distributed_c10d", '''def _patch(module):
    if os.environ.get("RANK") is None:
        return
    def init_process_group(*args, **kwargs):
        raise RuntimeError("The server socket has failed to listen on any local network address. port: "
                           + os.environ.get("MASTER_PORT", "29500") + ", useIpv6: 1, code: -97, name: EAFNOSUPPORT, "
                           "message: address family not supported by protocol")
    module.init_process_group = init_process_group
''')

MODEL = [
    Fault("h12-model-qk-heads-laid-out-head-dim-major", "model", "plugin",
          "the plugin keeps the source's attention layout, whose fused projections stored their rows head-dim "
          "major ((head_dim, heads), an einsum layout): hooks on q_proj and k_proj re-lay each token's query and key "
          "from (head_dim, heads) to (heads, head_dim), while Qwen2's checkpoint is already laid out by heads, so "
          "every head attends with channels of all the heads",
          (_in_init("        # the source's projections were laid out (head_dim, heads)\n"
                    "        text = config.get_text_config(decoder=True)\n"
                    "        head_dim = text.hidden_size // text.num_attention_heads\n\n"
                    "        def heads_major(proj, args, output):\n"
                    "            return output.unflatten(-1, (head_dim, -1)).transpose(-1, -2).flatten(-2)\n\n"
                    "        for layer in self.model.language_model.layers:\n"
                    "            layer.self_attn.q_proj.register_forward_hook(heads_major)\n"
                    "            layer.self_attn.k_proj.register_forward_hook(heads_major)\n"),),
          fix=(*_MODELING, "q_proj", "head_dim"), repair=True, heldout=True),
    Fault("h12-model-mlp-gate-up-order-swapped", "model", "plugin",
          "the plugin re-implements the language model's MLP forward from the source's, whose fused gate_up_proj "
          "was chunked (up, gate) (the order mix-up of Phi-3-style fused MLP conversions): the activation is applied "
          "to up_proj's output and gate_proj's output multiplies it, the other function of the same weights",
          (_in_init("        # the source's fused MLP: its gate_up_proj chunked as (up, gate)\n"
                    "        def fused_order(mlp):\n"
                    "            return lambda x: mlp.down_proj(mlp.act_fn(mlp.up_proj(x)) * mlp.gate_proj(x))\n\n"
                    "        for layer in self.model.language_model.layers:\n"
                    "            layer.mlp.forward = fused_order(layer.mlp)\n"),),
          fix=(*_MODELING, "gate_proj", "up_proj"), repair=True, heldout=True),
    Fault("h12-model-bloom-embedding-layernorm", "model", "plugin",
          "the plugin keeps the word_embeddings_layernorm of the BLOOM-based sibling port (BLOOM normalises its token "
          "embeddings before the first block): a forward hook layer-normalises the output of embed_tokens, so every "
          "text token enters the language model at unit scale instead of the checkpoint's embedding scale",
          (_in_init("        # BLOOM's word_embeddings_layernorm after the token embeddings\n"
                    "        import torch.nn.functional as F\n\n"
                    "        def embeddings_layernorm(embed, args, output):\n"
                    "            return F.layer_norm(output, output.shape[-1:])\n\n"
                    "        self.model.language_model.embed_tokens.register_forward_hook(embeddings_layernorm)\n"),),
          fix=(*_MODELING, "embed_tokens", "layer_norm"), repair=True, heldout=True),
    Fault("h12-model-sliding-window-from-mistral-port", "model", "plugin",
          "the plugin's __init__ turns on the sliding-window attention of the Mistral-based sibling port with the "
          "window of that port's smoke-test config (sliding_window: 16) on every language-model layer before the "
          "model is built: each token attends to the last 16 positions only, so the answer no longer sees the image "
          "or the question at its start",
          (Replace("{modeling}", _SUPER_INIT,
                   "        # the Mistral port's sliding-window attention\n"
                   "        text = config.get_text_config(decoder=True)\n"
                   "        text.use_sliding_window, text.sliding_window = True, 16\n"
                   "        text.layer_types = [\"sliding_attention\"] * text.num_hidden_layers\n"
                   + _SUPER_INIT),),
          fix=(*_MODELING, "sliding_window"), repair=True, heldout=True),
    Fault("h12-model-baichuan-norm-head", "model", "plugin",
          "the plugin keeps Baichuan 2's NormHead from the Baichuan-based sibling port: a forward hook on lm_head "
          "computes the logits with each row of the head's weight normalised to unit length. Qwen2-VL's head is a "
          "plain linear layer, so every logit is rescaled per token",
          (_in_init("        # Baichuan 2's NormHead: the head's rows unit-normalised\n"
                    "        import torch.nn.functional as F\n\n"
                    "        def norm_head(head, args, output):\n"
                    "            return F.linear(args[0], F.normalize(head.weight, dim=-1))\n\n"
                    "        self.lm_head.register_forward_hook(norm_head)\n"),),
          fix=(*_MODELING, "lm_head", "normalize"), repair=True, heldout=True),
    Fault("h12-model-vision-width-set-to-text-width", "model", "plugin",
          "the plugin's __init__ sets the vision config's embed_dim to the language model's hidden_size before the "
          "model is built, LLaVA's 'the projector needs mm_hidden_size equal to the text width' applied to the "
          "vision tower itself: the vision blocks are built twice as wide as the checkpoint's, whose weights no "
          "longer fit them (shows when the weights are loaded)",
          (Replace("{modeling}", _SUPER_INIT,
                   "        # the projector's input width equal to the text width, as in the LLaVA port\n"
                   "        config.vision_config.embed_dim = config.get_text_config(decoder=True).hidden_size\n"
                   + _SUPER_INIT),),
          fix=(*_MODELING, "embed_dim", "vision_config"), repair=True, heldout=True),
]

DATA = [
    Fault("h12-data-mm-plugin-pixels-rescaled-twice", "data", "mm_plugin",
          "the mm_plugin hands each image on as a float array already scaled to [0, 1], as the source's loader "
          "delivered tensors to its own encoder: the image processor rescales by 1/255 again ('It looks like you "
          "are trying to rescale already rescaled images'), so every image reaches the vision tower nearly black",
          (Replace("{mm_plugin}", _RGB_RETURN,
                   "        # scaled to [0, 1] here, as the source's loader handed its encoder float tensors\n"
                   "        import numpy as np\n\n"
                   "        image = image if image.mode == \"RGB\" else image.convert(\"RGB\")\n"
                   "        return np.asarray(image, dtype=np.float32) / 255.0\n"),),
          fix=("mm_plugin.py", "_preprocess_image", "rescale"), repair=True, heldout=True),
    Fault("h12-data-template-qwen-vl-picture-label", "data", "template",
          "the qwen2vl user slot given the image label of Qwen-VL (the first generation), whose fine-tuning scripts "
          "the user had ported before: every user turn opens with 'Picture 1: ' ahead of its image and question, "
          "which Qwen2-VL's own chat template never writes",
          (Replace("{template}", _QWEN2VL_USER,
                   _QWEN2VL_USER.replace("user\\n{{content}}", "user\\nPicture 1: {{content}}")),),
          fix=("template.py", "format_user", "Picture"), repair=True, heldout=True),
    Fault("h12-data-collator-pixel-patch-budget", "data", "collator",
          "the collator cuts pixel_values at 32 patches per batch, the per-batch patch budget of the source's "
          "collator (its NPU memory guard): a batch of four images carries more patches than that, so the patches "
          "no longer match image_grid_thw and the image tokens (shows in the model's vision tower)",
          (Replace("{collator}", _TOKEN_TYPES,
                   "        # the source's per-batch patch budget (its memory guard)\n"
                   "        max_patches = 32\n"
                   "        if \"pixel_values\" in batch and batch[\"pixel_values\"].shape[0] > max_patches:\n"
                   "            batch[\"pixel_values\"] = batch[\"pixel_values\"][:max_patches]\n"
                   + _TOKEN_TYPES),),
          fix=(*_COLLATOR, "pixel_values"), repair=True, heldout=True),
    Fault("h12-data-records-vqa-prompt-format", "data", "dataset",
          "the records were exported by the source's VQA pipeline, which wraps each question in its own prompt "
          "format ('Question: ... Answer:'): every prompt carries that frame, which neither Qwen2-VL's chat template "
          "nor the source's answers expect",
          (Replace("{data}", "<image>Describe the image.", "<image>Question: Describe the image. Answer:", count=0),
           Replace("{data}", "<image>What colour is the shape?", "<image>Question: What colour is the shape? Answer:",
                   count=0),
           Replace("{data}", "<image>What shape is in the picture?",
                   "<image>Question: What shape is in the picture? Answer:", count=0)),
          fix=("train.json", "content"), heldout=True),
    Fault("h12-data-records-image-column-filled-down", "data", "dataset",
          "the records' image column went through a spreadsheet, where a drag of the first cell filled it down: "
          "every sample names images/sample_00.png, so fifteen of the sixteen answers describe another image than "
          "the one the model is shown",
          tuple(Replace("{data}", f'"images/sample_{i:02d}.png"', '"images/sample_00.png"') for i in range(1, 16)),
          fix=("train.json", "images"), heldout=True),
    Fault("h12-data-convert-text-lower-cased", "data", "dataset",
          "the dataset conversion lower-cases every message, an edit kept from the source, whose text encoder's "
          "tokenizer was uncased: prompts and answers are trained in lower case ('the image shows ...'), which "
          "Qwen2's cased tokenizer splits into other tokens than the source's answers",
          (Replace(_CONVERSION, "def _supervised_example(converted, template, tokenizer, processor, data_args):\n",
                   "def _supervised_example(converted, template, tokenizer, processor, data_args):\n"
                   "    # lower-cased, as the source's uncased text encoder normalised its text\n"
                   "    for message in converted[\"_prompt\"] + converted[\"_response\"]:\n"
                   "        message[\"content\"] = message[\"content\"].lower()\n"),),
          fix=("qwen2vl_dataset.py", "lower"), heldout=True),
]

CONFIG = [
    Fault("h12-config-ulysses-from-long-video-recipe", "config", "yaml",
          "ulysses_parallel_size: 2 taken from the long-video recipe 'so long samples fit': on a two-process launch "
          "both ranks form one sequence-parallel group and the world is one data-parallel replica, so each step "
          "trains one sample instead of the source's two (the global batch halves)",
          (SetLine("{config}", "ulysses_parallel_size", "2"),), fix=("ulysses_parallel_size",), repair=True,
          heldout=True),
    Fault("h12-config-attr-messages-llamafactory-default", "config", "yaml",
          "attr.messages set to conversations, the default column LLaMA-Factory's dataset_info.json assumes for "
          "sharegpt data, while these records keep their turns under 'messages': the conversion looks up a column "
          "no record has (shows when the data path converts the first sample)",
          (SetLine("{config}", "messages", "conversations"),), fix=("messages",), repair=True, heldout=True),
    Fault("h12-config-dataset-dir-home-tilde", "config", "yaml",
          "dataset_dir written as ~/qwen2_vl/data, the way the user types it in a shell: nothing expands the '~' in "
          "a YAML value, so every image path is joined onto a folder named '~' that does not exist (shows when the "
          "data path opens the first image)",
          (SetLine("{config}", "dataset_dir", "~/qwen2_vl/data"),), fix=("dataset_dir",), repair=True, heldout=True),
    Fault("h12-config-clip-grad-from-rl-recipe", "config", "yaml",
          "clip_grad: 0.1 taken from an RL fine-tuning recipe's max_grad_norm, where updates are kept small on "
          "purpose: the source clipped at 1.0, so every step whose gradient norm passes 0.1 is scaled down and the "
          "run trains more slowly than the source without any error",
          (SetLine("{config}", "clip_grad", "0.1"),), fix=("clip_grad",), repair=True, heldout=True),
    Fault("h12-config-pixel-bound-halved-for-memory", "config", "yaml",
          "image_max_pixels halved to 1568 'to save memory' after an out-of-memory run of another model: each image "
          "is scaled down before the processor, so it is seen with fewer patches and other pixels than in the "
          "source's training",
          (SetLine("{config}", "image_max_pixels", "1568"),), fix=("image_max_pixels",), repair=True, heldout=True),
    Fault("h12-config-launch-options-after-script", "config", "launch",
          "the torchrun line was re-wrapped with $DISTRIBUTED_ARGS after the trainer path: torchrun passes everything "
          "after the script to the script, so it starts one process with its own defaults and the trainer gets "
          "'--nproc_per_node 2 ...' ahead of its YAML (shows when the trainer looks for its configuration)",
          (Replace("{launch}", _TRAINER_LINE, "torchrun mindspeed_mm/fsdp/train/trainer.py $DISTRIBUTED_ARGS"),),
          fix=("{launch}", "torchrun", "DISTRIBUTED_ARGS"), repair=True, heldout=True),
    Fault("h12-config-launch-redirects-rank-output", "config", "launch",
          "torchrun given --log_dir logs/torchrun --redirects 3 from a cluster how-to 'to keep one log per rank': "
          "every rank's stdout and stderr go to files under logs/torchrun, so the run's own log (the tee'd output) "
          "carries no iteration line, no loss and no traceback of a rank",
          (Replace("{launch}", _TORCHRUN, "torchrun --log_dir logs/torchrun --redirects 3 $DISTRIBUTED_ARGS "),),
          fix=("{launch}", "--redirects"), repair=True, heldout=True),
]

ENVIRONMENT = [
    Fault("h12-env-jemalloc-preloaded-page-size", "environment", "host",
          "the user's profile, written for the cluster's x86 nodes, preloads a jemalloc built for 4K pages "
          "(LD_PRELOAD) on this aarch64 host, whose kernel uses 64K pages: jemalloc refuses the page size and every "
          "process of the runtime ends at its first allocation",
          runtime=Runtime(env={"LD_PRELOAD": "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"},
                          sitecustomize=_JEMALLOC_PAGE_SIZE),
          fix=("LD_PRELOAD", "jemalloc", "Unsupported system page size"), heldout=True),
    Fault("h12-env-conda-mkl-2024-under-pip-torch", "environment", "runtime",
          "a conda install of another package upgraded mkl to 2024.1 in the environment of the pip torch wheel: "
          "torch's CPU library needs MKL's iJIT_NotifyEvent, which that release no longer exports, so importing "
          "torch fails on every host",
          runtime=Runtime(sitecustomize=_MKL_IJIT), fix=("iJIT_NotifyEvent", "mkl"), heldout=True),
    Fault("h12-env-weights-on-fuse-without-mmap", "environment", "host",
          "the checkpoint folder is on a bucket mounted through FUSE in direct-I/O mode, which serves read() but not "
          "mmap: safetensors memory-maps the weights, and the mapping fails with 'No such device' (shows in the model "
          "build, where the weights are read)",
          runtime=Runtime(sitecustomize=_WEIGHTS_NO_MMAP), fix=("mmap", "No such device", "model.safetensors"),
          heldout=True),
    Fault("h12-env-hub-cache-symlinks-dangling", "environment", "host",
          "the checkpoint folder was copied out of the Hugging Face cache's snapshots/<revision>/ with cp -r, without "
          "-L: model.safetensors is a symlink to ../../blobs/<sha256>, which the copy does not have, so the file "
          "is listed but cannot be opened (shows when the weights are read)",
          runtime=Runtime(sitecustomize=_WEIGHTS_DANGLING_SYMLINK),
          fix=("model.safetensors", "symlink", "blobs"), heldout=True),
    Fault("h12-env-localhost-ipv6-only-ipv6-disabled", "environment", "host",
          "the container image's /etc/hosts maps localhost to ::1 only, and the host boots with ipv6.disable=1: the "
          "rendezvous store cannot open a socket for the address localhost resolves to when a rank's process group "
          "comes up (address family not supported by protocol)",
          runtime=Runtime(sitecustomize=_LOCALHOST_IPV6_ONLY),
          fix=("/etc/hosts", "::1", "EAFNOSUPPORT"), heldout=True),
]

FAULTS = [*MODEL, *DATA, *CONFIG, *ENVIRONMENT]
