"""The eleventh held-out group (``h11-``): faults written blind by someone who never read the classifier, the failure
catalog, the owner rules, the routing code, the gate code, the routing tests or any routing result, and never ran the
classifier, ``msmigrate verify`` or the routing bench on them while writing. They were written from the green qwen2_vl
stand-in migration's delivered files (the plugin package, the YAML, the launch script, the source's records), the
stand-in target's data path and trainer (template, mm_plugin, collator, dataset conversion, sampler, loss, trainer and
its checkpoint load), the installed transformers and torch, the fault machinery (injection.py) and the earlier groups'
fault lists (read only for their ids and stories, to leave out every mechanism they already cover), from how public VLM
porting, fine-tuning and launching reports go wrong: Gemma's RMSNorm that scales by (1 + weight) kept from the sibling
plugin, an attention scaled by the model width instead of the head size (the query_pre_attn_scalar confusion), the
rotary rotation of the source's GPT-J-style interleaved pairs in place of the half-split one (the q / k permutation
mix-up of Llama conversions), MiniCPM's depth-scaled residual branches, the sibling Gemma port's GELU activation, and a
forward that re-shapes the flattened patches into the source encoder's 224-pixel images; an mm_plugin that hands an
image back through numpy with PIL's (width, height) taken as the array's shape, a template whose system block slid out
of the first-message guard in a merge, a collator that builds image_grid_thw from the image sizes, records whose every
word 'image' became the placeholder in a blanket find-and-replace, records whose answers carry the web page's
non-breaking spaces, and a conversion whose prompt mask counts the BOS of the source's Llama tokenizer; a YAML whose
pixel bound is written as the model card's Python arithmetic, that freezes the vision tower as LLaMA-Factory does by
default, that names the plugin by its module file, that asks for the per-token loss without the loader it needs, that
logs every ten iterations in a six-iteration run; a launch script that counts its devices with npu-smi, and one started
with MindSpore's msrun from a MindFormers how-to; a torch CUDA wheel installed with --no-deps (no cuDNN), a profile's
MKL_THREADING_LAYER=INTEL under torch's GNU OpenMP, a host whose ephemeral ports are used up, a weights file cut short
by an interrupted copy, and a scheduler prolog that left the previous job's visible devices exported.

Some fail loudly, some only change numbers (the norm offset, the attention scaling, the rotary pairs, the residual
scaling, the activation, the scrambled pixels, the system block in the answers, the non-breaking spaces, the first
answer token masked, the frozen vision tower); several would show in another phase's gate than the owner's (the
collator's grid fails in the model's vision tower, the tagged records fail in the mm_plugin, the pixel bound fails when
the YAML is parsed, the plugin path fails when the model id is looked up, the per-token loss fails when the training
engine is built, the truncated weights fail in the model build). The public reports read for them are issue threads and
model cards of the same conditions (Gemma's '(1 + weight)' RMSNorm in ports, Gemma 2's query_pre_attn_scalar, 'permute
q_proj / k_proj for rotary' in Llama conversions, MiniCPM's scale_depth, gelu_pytorch_tanh in Gemma configs,
'libcudnn.so.9: cannot open shared object file', 'MKL_THREADING_LAYER=INTEL is incompatible with libgomp.so.1 library',
'Cannot assign requested address' from gloo's connect, 'incomplete metadata, file not fully covered' from safetensors,
'invalid device ID' with a stale ASCEND_RT_VISIBLE_DEVICES, LLaVA's 'tokenization mismatch' off-by-one, 'max_pixels =
1280*28*28' from the Qwen2-VL model card, LLaMA-Factory's freeze_vision_tower default, npu-smi in Ascend launch scripts,
msrun in MindFormers' scripts). Each fault was chosen for being a mechanism no earlier group has and for how users get
there, and was checked only for applying to the green migration and for changing what it computes (or producing its
condition), never for how it would be routed. Like the earlier held-out groups, their figures are reported apart
(``--group heldout11``) and a miss is recorded, never fixed by editing the fault or by a rule keyed on its text.

``repair`` marks the faults whose fix lies in the run's own artifacts (the plugin, the data path's mm_plugin / template
/ collator, the YAML, the launch script); the records, the target's dataset conversion, the runtime and the host are not
the run's to rewrite."""

from __future__ import annotations

from msmigrate.testbeds.faults.heldout3 import _in_init, _wrapping_forward
from msmigrate.testbeds.faults.injection import Fault, Replace, Runtime, SetLine, after_import

_MODELING = ("{modeling}", "{plugin}")
_COLLATOR = ("func_utils/collator.py", "collator.py")
_CONVERSION = "mindspeed_mm/fsdp/data/datasets/huggingface/qwen2vl_dataset.py"
_RGB_RETURN = '        return image if image.mode == "RGB" else image.convert("RGB")\n'
_SYSTEM_ON_FIRST = ("            if i == 0:\n"
                    "                slots += self.format_prefix.apply()\n"
                    "                if system:\n"
                    "                    slots += self.format_system.apply(content=system)\n")
_TOKEN_TYPES = ("        if images:\n"
                "            image_token_id = self.tokenizer.convert_tokens_to_ids("
                "self.template.mm_plugin.image_token)\n")
_TORCHRUN = "torchrun $DISTRIBUTED_ARGS "

# The torch wheel for CUDA was installed with pip's --no-deps (to keep the environment's pinned numpy): the nvidia-*
# wheels it loads its libraries from are not there, and torch's library cannot be loaded whatever the host has
_CUDNN_MISSING = '''import sys
class _NoCudnn:
    def find_spec(self, name, path=None, target=None):
        if name == "torch._C":
            raise ImportError("libcudnn.so.9: cannot open shared object file: No such file or directory")
        return None
sys.meta_path.insert(0, _NoCudnn())
'''

# A shell profile written for a conda environment with MKL exports MKL_THREADING_LAYER=INTEL; the runtime's numpy is
# MKL's (mkl-service), and torch has already loaded GNU OpenMP (libgomp) when numpy is imported: MKL refuses the layer
# and ends the process
_MKL_LAYER = '''import os, sys
class _MklService:
    def find_spec(self, name, path=None, target=None):
        if name != "numpy" or "torch" not in sys.modules:
            return None
        if os.environ.get("MKL_THREADING_LAYER", "").upper() == "INTEL" and not os.environ.get(
                "MKL_SERVICE_FORCE_INTEL"):
            sys.stderr.write("Error: mkl-service + Intel(R) MKL: MKL_THREADING_LAYER=INTEL is incompatible with "
                             "libgomp.so.1 library.\\n\\tTry to import numpy first or set the threading layer "
                             "accordingly. Set MKL_SERVICE_FORCE_INTEL to force it.\\n")
            sys.stderr.flush()
            os._exit(1)
        return None
sys.meta_path.insert(0, _MklService())
'''

# A crawler on the same host keeps thousands of short connections in TIME_WAIT: the local port range is used up, and
# gloo's pairs cannot connect to the rendezvous peers when a rank's process group comes up
_PORTS_EXHAUSTED = after_import("torch.distributed.distributed_c10d", '''def _patch(module):
    if os.environ.get("RANK") is None:
        return
    def init_process_group(*args, **kwargs):
        raise RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:177] connect [127.0.0.1]:"
                           + os.environ.get("MASTER_PORT", "29500") + ": Cannot assign requested address")
    module.init_process_group = init_process_group
''')

# The weights were copied onto the host with an scp that was cut off (the session timed out) and the partial file
# kept its name: the header promises more bytes than the file holds
_WEIGHTS_TRUNCATED = after_import("safetensors", '''def _patch(module):
    real = module.safe_open
    error = getattr(module, "SafetensorError", OSError)
    class safe_open:
        def __new__(cls, filename, *args, **kwargs):
            if os.fsdecode(os.fspath(filename)).endswith(".safetensors"):
                raise error("Error while deserializing header: incomplete metadata, file not fully covered")
            return real(filename, *args, **kwargs)
    module.safe_open = safe_open
''')

# The scheduler's prolog exports ASCEND_RT_VISIBLE_DEVICES from the previous job's allocation (devices 4 and 5) on a
# node that shows two devices to this container: the runtime knows no such device when a rank sets its device
_STALE_VISIBLE_DEVICES = after_import("torch", '''def _patch(module):
    if os.environ.get("RANK") is None:
        return
    def set_device_index(device, /):
        raise RuntimeError("npu set device failed: aclrtSetDevice(device_id_) returned 107001: invalid device ID "
                           "(ASCEND_RT_VISIBLE_DEVICES=" + os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "")
                           + ", 2 devices visible)")
    module.accelerator.set_device_index = set_device_index
    module.accelerator.set_device_idx = set_device_index
''')

MODEL = [
    Fault("h11-model-gemma-rmsnorm-offset", "model", "plugin",
          "the plugin was started from the Gemma-based sibling plugin and keeps its forward hook on every "
          "language-model RMSNorm, which re-scales the normalised hidden states by (1 + weight), Gemma's "
          "convention for norm weights stored around zero: Qwen2-VL stores its norm weights around one, so every "
          "norm now scales by about two",
          (_in_init("        # Gemma's RMSNorm: the weight is stored as an offset from one\n"
                    "        import torch\n\n"
                    "        def offset_norm(norm, args, output):\n"
                    "            hidden = args[0].float()\n"
                    "            hidden = hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + "
                    "norm.variance_epsilon)\n"
                    "            return (hidden * (1.0 + norm.weight.float())).to(output.dtype)\n\n"
                    "        for norm in self.model.language_model.modules():\n"
                    "            if type(norm).__name__.endswith(\"RMSNorm\"):\n"
                    "                norm.register_forward_hook(offset_norm)\n"),),
          fix=(*_MODELING, "RMSNorm", "weight"), repair=True, heldout=True),
    Fault("h11-model-attention-scaled-by-model-width", "model", "plugin",
          "the plugin's __init__ sets every language-model attention's scaling to hidden_size ** -0.5, the "
          "softmax scale of the source's own attention, which divided by the model width (the query_pre_attn_scalar "
          "confusion of the Gemma 2 ports): Qwen2-VL scales by the head size, so every attention score is two times "
          "flatter here",
          (_in_init("        # the source's attention scale: the model width\n"
                    "        text = config.get_text_config(decoder=True)\n"
                    "        for layer in self.model.language_model.layers:\n"
                    "            layer.self_attn.scaling = text.hidden_size ** -0.5\n"),),
          fix=(*_MODELING, "scaling", "head_dim"), repair=True, heldout=True),
    Fault("h11-model-rotary-interleaved-pairs", "model", "plugin",
          "the plugin's __init__ swaps the modeling module's rotate_half for the interleaved rotation of the source's "
          "GPT-J-style rotary, which pairs neighbouring channels (0, 1), (2, 3) ...: Qwen2-VL's checkpoint was trained "
          "with the half-split pairs (i, i + d/2), so every query and key of the vision tower and the language model "
          "is rotated in the wrong planes (the layout mix-up of Llama conversions without the q / k permutation)",
          (_in_init("        # the source's rotary pairs neighbouring channels (GPT-J's interleaved layout)\n"
                    "        import torch\n"
                    "        from transformers.models.qwen2_vl import modeling_qwen2_vl\n\n"
                    "        def rotate_every_two(x):\n"
                    "            x1, x2 = x[..., ::2], x[..., 1::2]\n"
                    "            return torch.stack((-x2, x1), dim=-1).flatten(-2)\n\n"
                    "        modeling_qwen2_vl.rotate_half = rotate_every_two\n"),),
          fix=(*_MODELING, "rotate_half"), repair=True, heldout=True),
    Fault("h11-model-minicpm-residual-scale-depth", "model", "plugin",
          "the plugin keeps the depth scaling of the MiniCPM-V port it was adapted from: each attention and MLP "
          "branch's output is multiplied by scale_depth / sqrt(num_hidden_layers) (1.4 / sqrt(2)) before it joins "
          "the residual stream. Qwen2-VL's layers add their branches unscaled",
          (_in_init("        # MiniCPM's scale_depth on the residual branches\n"
                    "        text = config.get_text_config(decoder=True)\n"
                    "        branch_scale = 1.4 / text.num_hidden_layers ** 0.5\n\n"
                    "        def scale_branch(module, args, output):\n"
                    "            if isinstance(output, tuple):\n"
                    "                return (output[0] * branch_scale, *output[1:])\n"
                    "            return output * branch_scale\n\n"
                    "        for layer in self.model.language_model.layers:\n"
                    "            layer.self_attn.register_forward_hook(scale_branch)\n"
                    "            layer.mlp.register_forward_hook(scale_branch)\n"),),
          fix=(*_MODELING, "scale_depth", "register_forward_hook"), repair=True, heldout=True),
    Fault("h11-model-text-activation-from-gemma", "model", "plugin",
          "the plugin's __init__ sets the text config's hidden_act to gelu_pytorch_tanh before the model is built, "
          "the activation of the Gemma-based sibling plugin it was started from ('the config of the sibling was the "
          "tested one'): every language-model MLP is built with GELU where the checkpoint was trained with SiLU, and "
          "computes another function of the same weights",
          (Replace("{modeling}", "        super().__init__(config, *args, **kwargs)\n",
                   "        # the activation of the sibling port's language model\n"
                   "        config.get_text_config(decoder=True).hidden_act = \"gelu_pytorch_tanh\"\n"
                   "        super().__init__(config, *args, **kwargs)\n"),),
          fix=(*_MODELING, "hidden_act"), repair=True, heldout=True),
    Fault("h11-model-pixel-values-as-images", "model", "plugin",
          "the plugin's forward re-shapes pixel_values to (-1, 3, 224, 224), the whole-image batch the source's "
          "CLIP-style encoder took: Qwen2-VL's processor hands flattened patches (patches, 1176), and their count "
          "does not fill whole 224-pixel images",
          (_wrapping_forward(before="        pixel_values = kwargs.get(\"pixel_values\")\n"
                                    "        if pixel_values is not None:\n"
                                    "            # the source's encoder took whole images\n"
                                    "            kwargs[\"pixel_values\"] = pixel_values.reshape(-1, 3, 224, 224)\n"),),
          fix=(*_MODELING, "pixel_values", "reshape"), repair=True, heldout=True),
]

DATA = [
    Fault("h11-data-mm-plugin-numpy-size-order", "data", "mm_plugin",
          "the mm_plugin hands each image back through a numpy array, as the source's OpenCV loader delivered "
          "arrays, and re-shapes it with PIL's size (width, height) as if it were the array's (height, width): a "
          "64x48 image comes back 48x64 with its rows cut and re-wrapped, so the pixels are scrambled while every "
          "count still fits",
          (Replace("{mm_plugin}", _RGB_RETURN,
                   "        # through numpy, as the source's OpenCV loader handed images on\n"
                   "        import numpy as np\n\n"
                   "        image = image if image.mode == \"RGB\" else image.convert(\"RGB\")\n"
                   "        return Image.fromarray(np.asarray(image).reshape(image.width, image.height, 3))\n"),),
          fix=("mm_plugin.py", "_preprocess_image", "reshape"), repair=True, heldout=True),
    Fault("h11-data-template-system-block-every-turn", "data", "template",
          "a merge of the template module re-indented the system block out of the first-message guard: the system "
          "turn is written before every message, so each answer's labels start with '<|im_start|>system\\nYou are a "
          "helpful assistant.<|im_end|>' and the model is trained to write it",
          (Replace("{template}", _SYSTEM_ON_FIRST,
                   "            if i == 0:\n"
                   "                slots += self.format_prefix.apply()\n"
                   "            if system:\n"
                   "                slots += self.format_system.apply(content=system)\n"),),
          fix=("template.py", "encode_multiturn", "format_system"), repair=True, heldout=True),
    Fault("h11-data-collator-grid-from-image-size", "data", "collator",
          "the collator overwrites image_grid_thw with (1, height // 14, width // 14) of each image, the way the "
          "source's collator counted its fixed 14-pixel patches: the processor resizes each image to whole 28-pixel "
          "cells first, so the grid no longer matches the patches in pixel_values (shows in the model's vision tower)",
          (Replace("{collator}", _TOKEN_TYPES,
                   "        if images:\n"
                   "            # the patch grid from each image's size, as the source's collator counted it\n"
                   "            sizes = [Image.open(i).size if isinstance(i, str) else i.size for i in images]\n"
                   "            batch[\"image_grid_thw\"] = torch.tensor([[1, h // 14, w // 14] for w, h in sizes])\n"
                   + _TOKEN_TYPES),),
          fix=(*_COLLATOR, "image_grid_thw"), repair=True, heldout=True),
    Fault("h11-data-records-word-image-tagged", "data", "dataset",
          "a blanket find-and-replace over the exported text, meant to turn the export's 'image' column header into "
          "the <image> placeholder, also turned the word in the prompts and answers into it ('Describe the <image>.', "
          "'The <image> shows ...'): those samples carry more placeholders than images",
          (Replace("{data}", "Describe the image.", "Describe the <image>.", count=0),
           Replace("{data}", "The image shows", "The <image> shows", count=0)),
          fix=("train.json", "<image>"), heldout=True),
    Fault("h11-data-records-nbsp-from-web-export", "data", "dataset",
          "the answers were copied out of the annotation tool's web view, which renders the spaces of the answer's "
          "ending as non-breaking spaces (U+00A0): 'on\\u00a0a\\u00a0white\\u00a0background.' tokenises into other "
          "tokens than the source's answers, and the model is trained to write them",
          (Replace("{data}", " on a white background.", "\\u00a0on\\u00a0a\\u00a0white\\u00a0background.", count=0),),
          fix=("train.json", "content"), heldout=True),
    Fault("h11-data-convert-prompt-mask-counts-bos", "data", "dataset",
          "the dataset conversion's prompt mask was adjusted for the source's Llama tokenizer, which put a BOS "
          "before every prompt (LLaVA's 'tokenization mismatch' off-by-one fix): it masks one position more than "
          "the prompt, so the first token of every answer is never trained",
          (Replace(_CONVERSION, "            source_labels = [IGNORE_INDEX] * len(source)\n",
                   "            # the prompt's length with the BOS the source's tokenizer added\n"
                   "            source_labels = [IGNORE_INDEX] * (len(source) + 1)\n"),
           Replace(_CONVERSION, "labels += source_labels + ([IGNORE_INDEX] * len(target) if history else target)",
                   "labels += (source_labels + ([IGNORE_INDEX] * len(target) if history else target))"
                   "[:len(source) + len(target)]")),
          fix=("qwen2vl_dataset.py", "source_labels", "IGNORE_INDEX"), heldout=True),
]

CONFIG = [
    Fault("h11-config-max-pixels-python-expression", "config", "yaml",
          "image_max_pixels written as 4*28*28, the arithmetic the Qwen2-VL model card's Python snippet uses "
          "(max_pixels = 1280*28*28): YAML reads it as the string '4*28*28', which is no integer (shows when the "
          "YAML's arguments are parsed)",
          (SetLine("{config}", "image_max_pixels", "4*28*28"),), fix=("image_max_pixels",), repair=True,
          heldout=True),
    Fault("h11-config-freeze-vision-tower-by-default", "config", "yaml",
          "freeze: [model.visual] added because LLaMA-Factory freezes the vision tower by default "
          "(freeze_vision_tower: true) and the user took that for the usual recipe: the source trained the vision "
          "tower, so from the first update on the run trains another set of parameters than the source",
          (Replace("{config}", "  freeze: []\n", "  freeze:\n    - model.visual\n"),), fix=("freeze",), repair=True,
          heldout=True),
    Fault("h11-config-plugin-named-by-module-file", "config", "yaml",
          "training.plugin names the plugin by its module file (mindspeed_mm/fsdp/models/qwen2_vl/"
          "modeling_qwen2_vl.py), as the user would open it: the entry is turned into a dotted module name ending in "
          "'.py', which is no module, so the import is only reported and the model id is never registered",
          (Replace("{config}", "    - mindspeed_mm/fsdp/models/qwen2_vl\n",
                   "    - mindspeed_mm/fsdp/models/qwen2_vl/modeling_qwen2_vl.py\n"),),
          fix=("plugin",), repair=True, heldout=True),
    Fault("h11-config-loss-per-token-without-its-loader", "config", "yaml",
          "loss_type: per_token_loss, chosen from the loss_type options because the source normalised by tokens "
          "across gradient accumulation: that loss needs the prefetching gradient-accumulation data loader, which "
          "this YAML does not turn on (shows when the training engine builds its loss)",
          (SetLine("{config}", "loss_type", "per_token_loss"),), fix=("loss_type",), repair=True, heldout=True),
    Fault("h11-config-log-interval-past-run-length", "config", "yaml",
          "log_interval: 10 kept from the recipe, where runs were thousands of iterations long: this run has six, "
          "so it trains and saves without printing one iteration line, and no loss of it is ever reported",
          (Replace("{config}", "  train_iters: 6\n", "  train_iters: 6\n  log_interval: 10\n"),),
          fix=("log_interval",), repair=True, heldout=True),
    Fault("h11-config-launch-devices-counted-by-npu-smi", "config", "launch",
          "the device count is read from npu-smi (NPUS_PER_NODE=$(npu-smi info -l | awk ...)), as the Ascend "
          "cluster's scripts do: on a host without npu-smi the count is empty, so the world size's arithmetic fails "
          "and torchrun's --nproc_per_node takes the next option as its value",
          (Replace("{launch}", "NPUS_PER_NODE=${NPUS_PER_NODE:-2}",
                   "NPUS_PER_NODE=$(npu-smi info -l | awk '/Total Count/ {print $NF}')"),),
          fix=("{launch}", "NPUS_PER_NODE", "npu-smi"), repair=True, heldout=True),
    Fault("h11-config-launch-msrun-from-mindformers", "config", "launch",
          "the launch line was rebuilt from a MindFormers how-to, which starts its workers with MindSpore's msrun "
          "(--worker_num, --local_worker_num, --join): msrun is MindSpore's launcher, not installed with torch, and "
          "the trainer is a torch program that reads torchrun's rank variables",
          (Replace("{launch}", _TORCHRUN,
                   "msrun --worker_num=$WORLD_SIZE --local_worker_num=$NPUS_PER_NODE --master_addr=$MASTER_ADDR "
                   "--master_port=$MASTER_PORT --join=True "),),
          fix=("{launch}", "torchrun", "msrun"), repair=True, heldout=True),
]

ENVIRONMENT = [
    Fault("h11-env-torch-cuda-wheel-without-deps", "environment", "runtime",
          "the runtime's torch is the CUDA wheel, installed with pip's --no-deps to keep the environment's pinned "
          "packages: the nvidia-cudnn wheel it loads its libraries from was never installed, so importing torch "
          "fails on libcudnn.so.9 on every host",
          runtime=Runtime(sitecustomize=_CUDNN_MISSING), fix=("libcudnn", "--no-deps", "torch"), heldout=True),
    Fault("h11-env-mkl-threading-layer-intel", "environment", "runtime",
          "the user's shell profile, written for a conda environment with MKL, exports MKL_THREADING_LAYER=INTEL: "
          "the runtime's numpy is MKL's, torch has loaded GNU OpenMP before numpy is imported, and MKL refuses the "
          "layer and ends the process",
          runtime=Runtime(env={"MKL_THREADING_LAYER": "INTEL"}, sitecustomize=_MKL_LAYER),
          fix=("MKL_THREADING_LAYER", "libgomp"), heldout=True),
    Fault("h11-env-ephemeral-ports-exhausted", "environment", "host",
          "a crawler on the same host keeps thousands of short connections in TIME_WAIT and uses up the local port "
          "range: gloo cannot open a connection to the rendezvous peers when a rank's process group comes up "
          "(Cannot assign requested address)",
          runtime=Runtime(sitecustomize=_PORTS_EXHAUSTED),
          fix=("Cannot assign requested address", "ip_local_port_range", "TIME_WAIT"), heldout=True),
    Fault("h11-env-weights-copy-truncated", "environment", "host",
          "the checkpoint's model.safetensors was copied with an scp that was cut off when the session timed out, "
          "and the partial file kept its name: its header promises more bytes than the file holds (shows in the "
          "model build, where the weights are read)",
          runtime=Runtime(sitecustomize=_WEIGHTS_TRUNCATED),
          fix=("model.safetensors", "incomplete metadata", "copy"), heldout=True),
    Fault("h11-env-stale-visible-devices", "environment", "host",
          "the scheduler's prolog exports ASCEND_RT_VISIBLE_DEVICES=4,5 from the previous job's allocation on a "
          "node whose container sees two devices: when a rank sets its device the runtime knows no such device",
          runtime=Runtime(env={"ASCEND_RT_VISIBLE_DEVICES": "4,5"}, sitecustomize=_STALE_VISIBLE_DEVICES),
          fix=("ASCEND_RT_VISIBLE_DEVICES", "invalid device ID"), heldout=True),
]

FAULTS = [*MODEL, *DATA, *CONFIG, *ENVIRONMENT]
