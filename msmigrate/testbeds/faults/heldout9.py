"""The ninth held-out group (``h9-``): faults written blind by someone who never read the classifier, the failure
catalog, the owner rules, the routing code, the gate code, the routing tests or any routing result, and never ran the
classifier, ``msmigrate verify`` or the routing bench on them while writing. They were written from the green qwen2_vl
stand-in migration's delivered files (the plugin package, the YAML, the launch script, the source's records), the
stand-in target's data path and trainer (template, mm_plugin, collator, dataset conversion, sampler, loss, trainer and
its checkpoint load), the installed transformers and torch, the fault machinery (injection.py) and the earlier groups'
fault lists (read only for their ids and stories, to leave out every mechanism they already cover), from how public VLM
porting, fine-tuning and launching reports go wrong: the bidirectional attention of a Qwen2-VL based embedding model
(GME / VLM2Vec-style retrievers) kept in a generative plugin, a loss normalised by the attention mask's token count (a
gradient-accumulation fix computed from the mask) instead of the answer tokens, the YaRN rope_scaling the Qwen model
cards suggest for long inputs, a fused rms_norm patch of an NPU port whose fallback calls layer_norm, a
begin-of-sequence token prepended the way LLaVA-Llama ports do, and a plugin that also registers its class with
transformers' Auto classes (``'...' is already used by a Transformers model``); an mm_plugin copied from a LLaVA-style
plugin that expands <image> without the vision start / end markers, a second ``qwen2vl`` template block pasted for the
base checkpoints under the same name (the later registration wins), a collator that stacks per-sample image tensors the
way LLaVA's collator stacks fixed-size crops, records exported from a Qwen-native pipeline with the rendered vision
markers instead of <image>, answers cut at an export tool's column width, answers carrying the rich-text editor's HTML;
a YAML whose dataset list includes the validation split, whose shuffling was switched off while debugging, whose micro
batch was doubled to use free memory, whose attr names the OpenAI formatting for role/content records, and whose load /
save were both pointed at one output folder the Megatron way (so that the job resumes itself); a launch script left at
one device from a debugging session, and one given torchrun's etcd rendezvous from an elastic-training how-to; a runtime
whose libgomp cannot be placed in the static TLS block (aarch64 hosts, the LD_PRELOAD fix), a torchvision built for
another torch (``operator torchvision::nms does not exist``), a login node's CPU-time limit that kills the job
mid-training (SIGXCPU), a container whose own hostname does not resolve (gloo's ``Unable to find address for``), a host
whose vm.max_map_count is too low for the ranks' weight mappings.

Some fail loudly, some only change numbers (the bidirectional attention, the mask-normalised loss, the YaRN rope, the
layer_norm fallback, the prepended begin token, the missing vision markers, the base template, the truncated and HTML
answers, the unshuffled data, the doubled micro batch, the single-device launch); several would show in another phase's
gate than the owner's (the missing markers and the stacked image tensors fail or differ inside the model's forward, the
OpenAI formatting and the validation file fail in the data path, the resume folder fails when the trainer loads its
weights, the torchvision mismatch fails when the data path loads the processor, the map-count limit fails in the model
build). The public reports read for them are issue threads of the same conditions ('cannot allocate memory in static TLS
block' with libgomp on aarch64, 'operator torchvision::nms does not exist' after a torch upgrade, 'is already used by a
Transformers model' from AutoModel.register, gloo's 'Unable to find address for' in containers, safetensors mmap failing
with ENOMEM, YaRN rope_scaling in the Qwen2-VL model card, the loss normaliser of gradient accumulation). Each fault
was chosen for being a mechanism no earlier group has and for how users get there, and was checked only for applying to
the green migration and for changing what it computes (or producing its condition), never for how it would be routed.
Like the earlier held-out groups, their figures are reported apart (``--group heldout9``) and a miss is recorded, never
fixed by editing the fault or by a rule keyed on its text.

``repair`` marks the faults whose fix lies in the run's own artifacts (the plugin, the data path's mm_plugin / template
/ collator, the YAML, the launch script); the records, the runtime and the host are not the run's to rewrite."""

from __future__ import annotations

from msmigrate.testbeds.faults.heldout3 import _in_init, _wrapping_forward
from msmigrate.testbeds.faults.injection import Fault, Replace, Runtime, SetLine, after_import

_MODELING = ("{modeling}", "{plugin}")
_COLLATOR = ("func_utils/collator.py", "collator.py")
_SUPER_INIT = "        super().__init__(config, *args, **kwargs)\n"
_REGISTER_IMPORT = "from mindspeed_mm.fsdp.utils.register import model_register\n"
# the plugin's class statement (the module ends after the class, so lines appended there run at import)
_IS_CUSTOM_CODE = "        return _UpstreamQwen2VLForConditionalGeneration.is_custom_code()\n"
_EXPANSION = "self.vision_bos_token + self.image_token * n + self.vision_eos_token"
_QWEN3VL_BLOCK = '_register_template(\n    name="qwen3_vl",\n'
_MM_INPUTS = ("        batch.update(self.template.mm_plugin.get_mm_inputs(images, [], [], imglens, zeros, zeros,\n"
              "                                                           batch[\"input_ids\"].tolist(), "
              "self.processor))\n")
_TORCHRUN = "torchrun $DISTRIBUTED_ARGS "

# a loss recomputed from the logits on the shifted labels (the forward override's own loss, after upstream's)
_SHIFTED = ("        labels = kwargs.get(\"labels\")\n"
            "        if labels is not None and out.logits is not None:\n"
            "            logits = out.logits[:, :-1].float()\n"
            "            target = labels[:, 1:]\n")

# aarch64 hosts (the Kunpeng hosts accelerators sit in): the OpenMP runtime torch links (libgomp) is loaded after
# other libraries took the static TLS block, and the dynamic loader cannot place it, so importing torch fails
_STATIC_TLS = '''import sys
class _StaticTLS:
    def find_spec(self, name, path=None, target=None):
        if name == "torch._C":
            # (torch's _load_global_deps dlopens its libraries with ctypes first: the loader's error is an OSError)
            raise OSError("/usr/lib/aarch64-linux-gnu/libgomp.so.1: cannot allocate memory in static TLS block")
        return None
sys.meta_path.insert(0, _StaticTLS())
'''

# torch upgraded on its own (pip install -U torch) under a torchvision built for the previous release: the
# torchvision package is there, and importing it fails on its C++ operators (transformers imports it when it looks
# for the fast image processors)
_TORCHVISION_ABI = '''import importlib.machinery, sys
class _Torchvision:
    def find_spec(self, name, path=None, target=None):
        if name == "torchvision":
            return importlib.machinery.ModuleSpec(name, self, origin="/opt/envs/mm/lib/python3.11/site-packages/"
                                                  "torchvision/__init__.py", is_package=True)
        return None
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        raise RuntimeError("operator torchvision::nms does not exist")
sys.meta_path.insert(0, _Torchvision())
'''

# The job runs on the cluster's login node, whose profile limits each process to 30 CPU-minutes (ulimit -t): the
# rank that reaches it is killed by SIGXCPU during training (here: at its third backward; the shell's report)
_CPU_TIME_LIMIT = after_import("torch._tensor", '''def _patch(module):
    if os.environ.get("RANK") is None:
        return
    real = module.Tensor.backward
    calls = [0]
    def backward(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == 3:
            import resource, signal
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            sys.stderr.write("CPU time limit exceeded\\n")
            sys.stderr.flush()
            signal.signal(signal.SIGXCPU, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGXCPU)
        return real(self, *args, **kwargs)
    module.Tensor.backward = backward
''')

# The container was started with a generated hostname that is in no /etc/hosts and no DNS: gloo looks up the host's
# own name to pick the address its pairs listen on, and cannot find one
_HOSTNAME_UNRESOLVED = after_import("torch.distributed.distributed_c10d", '''def _patch(module):
    if os.environ.get("RANK") is None:
        return
    real = module.init_process_group
    def init_process_group(*args, **kwargs):
        raise RuntimeError("[enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:84] ifa != nullptr. "
                           "Unable to find address for: job-7f3c2a-worker-0")
    module.init_process_group = init_process_group
''')

# vm.max_map_count left at a small value by a hardening profile: mapping the weights file fails with ENOMEM
_MAP_COUNT = after_import("safetensors", '''def _patch(module):
    import errno
    real = module.safe_open
    class safe_open:
        def __new__(cls, filename, *args, **kwargs):
            if os.fsdecode(os.fspath(filename)).endswith(".safetensors"):
                raise OSError(errno.ENOMEM, "Cannot allocate memory (os error 12): mmap of " + os.fsdecode(
                    os.fspath(filename)) + " failed (vm.max_map_count reached)")
            return real(filename, *args, **kwargs)
    module.safe_open = safe_open
''')

MODEL = [
    Fault("h9-model-text-attention-bidirectional", "model", "plugin",
          "the plugin was adapted from the sibling embedding-model port (a GME / VLM2Vec-style retriever built on "
          "Qwen2-VL) that turns the language model's attention bidirectional: every token of a generative SFT "
          "sample now attends to the answer tokens after it, so the model is trained to copy what it should predict",
          (_in_init("        # bidirectional attention, as the embedding port pools over every token\n"
                    "        for layer in self.model.language_model.layers:\n"
                    "            layer.self_attn.is_causal = False\n"
                    "        self.config.get_text_config(decoder=True).is_causal = False\n"),),
          fix=(*_MODELING, "is_causal"), repair=True, heldout=True),
    Fault("h9-model-loss-over-attended-tokens", "model", "plugin",
          "the plugin's forward recomputes the loss as the summed token losses divided by the attention mask's "
          "count (every real token: system prompt, question, image tokens and answer), the normaliser the source's "
          "gradient-accumulation fix computed from the mask: the loss is divided by several times the number of "
          "answer tokens it sums",
          (_wrapping_forward(after=_SHIFTED
                             + "            summed = torch.nn.functional.cross_entropy(\n"
                               "                logits.reshape(-1, logits.size(-1)), target.reshape(-1), "
                               "ignore_index=-100, reduction=\"sum\")\n"
                               "            out.loss = summed / kwargs[\"attention_mask\"][:, 1:].sum()\n"),),
          fix=(*_MODELING, "attention_mask", "loss"), repair=True, heldout=True),
    Fault("h9-model-yarn-rope-scaling", "model", "plugin",
          "the plugin's __init__ adds the YaRN rope scaling (factor 4) that the Qwen model card suggests for inputs "
          "past 32K tokens, 'so long documents work too': the rotary frequencies and the attention scaling are "
          "no longer those the checkpoint was trained with, on every sequence however short",
          (Replace("{modeling}", _SUPER_INIT,
                   "        text = config.get_text_config(decoder=True)\n"
                   "        # the model card's tip for long inputs (rope_scaling: yarn, factor 4)\n"
                   "        rope = dict(getattr(text, \"rope_parameters\", None) or {})\n"
                   "        rope.update(rope_type=\"yarn\", factor=4.0, original_max_position_embeddings=32768)\n"
                   "        text.rope_parameters = rope\n" + _SUPER_INIT),),
          fix=(*_MODELING, "rope_scaling", "yarn"), repair=True, heldout=True),
    Fault("h9-model-rmsnorm-layernorm-fallback", "model", "plugin",
          "the plugin module patches Qwen2VLRMSNorm.forward with the accelerator's fused rms_norm wrapper of the "
          "sibling NPU port, whose fallback off the accelerator calls layer_norm: every norm of the language model "
          "subtracts the mean before scaling, so every hidden state the checkpoint's weights see changes",
          (Replace("{modeling}", _REGISTER_IMPORT,
                   _REGISTER_IMPORT + "\n\nimport torch.nn.functional as _F  # noqa: E402\n"
                   "from transformers.models.qwen2_vl import modeling_qwen2_vl as _upstream  # noqa: E402\n\n\n"
                   "def _fused_rms_norm(self, hidden_states):\n"
                   "    \"\"\"npu_rms_norm on the accelerator; the fallback elsewhere.\"\"\"\n"
                   "    return _F.layer_norm(hidden_states, (hidden_states.shape[-1],), self.weight, None,\n"
                   "                         self.variance_epsilon)\n\n\n"
                   "_upstream.Qwen2VLRMSNorm.forward = _fused_rms_norm\n"),),
          fix=(*_MODELING, "RMSNorm", "layer_norm"), repair=True, heldout=True),
    Fault("h9-model-bos-prepended", "model", "plugin",
          "the plugin's forward prepends the text config's bos_token_id to every sequence (with its mask, a masked "
          "label and no image type), the 'every sample starts with <s>' habit of the LLaVA-Llama port it was "
          "adapted from: Qwen2-VL's chat format has no begin token, so every position and every context the "
          "checkpoint sees is shifted by one token it never had",
          (_wrapping_forward(before="        ids = kwargs.get(\"input_ids\")\n"
                                    "        bos = self.config.get_text_config(decoder=True).bos_token_id\n"
                                    "        if ids is not None and bos is not None:\n"
                                    "            lead = ids.new_full((ids.size(0), 1), bos)\n"
                                    "            kwargs[\"input_ids\"] = torch.cat([lead, ids], dim=1)\n"
                                    "            for key, fill in ((\"attention_mask\", 1), (\"labels\", -100), "
                                    "(\"mm_token_type_ids\", 0)):\n"
                                    "                if kwargs.get(key) is not None:\n"
                                    "                    kwargs[key] = torch.cat([kwargs[key].new_full("
                                    "(ids.size(0), 1), fill), kwargs[key]], dim=1)\n"),),
          fix=(*_MODELING, "bos_token_id", "input_ids"), repair=True, heldout=True),
    Fault("h9-model-auto-class-registered", "model", "plugin",
          "the plugin module also registers its class with transformers' AutoModelForImageTextToText 'so "
          "from_pretrained finds it', the recipe for custom models in the transformers docs: Qwen2VLConfig already "
          "has a model there, and importing the plugin raises",
          (Replace("{modeling}", _IS_CUSTOM_CODE,
                   _IS_CUSTOM_CODE + "\n\nfrom transformers import AutoModelForImageTextToText, Qwen2VLConfig  "
                                     "# noqa: E402\n\n"
                                     "AutoModelForImageTextToText.register(Qwen2VLConfig, "
                                     "Qwen2VLForConditionalGeneration)\n"),),
          fix=(*_MODELING, "AutoModelForImageTextToText.register"), repair=True, heldout=True),
]

DATA = [
    Fault("h9-data-mm-plugin-no-vision-markers", "data", "mm_plugin",
          "the mm_plugin's expansion copied from a LLaVA-style plugin turns <image> into the image tokens alone, "
          "without <|vision_start|> and <|vision_end|> around them: the prompts differ from the checkpoint's own, and "
          "Qwen2-VL's rope index looks for each image after its vision-start token",
          (Replace("{mm_plugin}", _EXPANSION, "self.image_token * n"),),
          fix=("mm_plugin.py", "vision_bos_token", "vision_eos_token"), repair=True, heldout=True),
    Fault("h9-data-template-registered-twice", "data", "template",
          "a second qwen2vl block pasted below the first for an experiment with the base (non-chat) checkpoint, its "
          "name left unchanged: the later registration replaces the chat template, so every sample is encoded "
          "without the system turn, the role markers and <|im_end|>",
          (Replace("{template}", _QWEN3VL_BLOCK,
                   "# Qwen2-VL base checkpoints (pretrained, no chat markers)\n"
                   "_register_template(\n"
                   "    name=\"qwen2vl\",\n"
                   "    params=RegisterParams(\n"
                   "        format_user=StringFormatter(slots=[\"{{content}}\"]),\n"
                   "        format_assistant=StringFormatter(slots=[\"{{content}}\", {\"eos_token\"}])),\n"
                   "    mm_plugin=get_mm_plugin(name=\"qwen2_vl\", image_token=\"<|image_pad|>\", "
                   "video_token=\"<|video_pad|>\"),\n"
                   ")\n\n" + _QWEN3VL_BLOCK),),
          fix=("template.py", "qwen2vl", "_register_template"), repair=True, heldout=True),
    Fault("h9-data-collator-stacks-per-sample", "data", "collator",
          "the collator runs the image processor per sample and stacks the results with torch.stack, as LLaVA's "
          "collator stacks its fixed-size crops: Qwen2-VL images have as many patches as their size gives, so the "
          "batch gets a (samples, patches, dim) tensor, or the stack fails on images of different sizes",
          (Replace("{collator}", _MM_INPUTS,
                   "        per_inputs = [self.template.mm_plugin.get_mm_inputs(imgs, [], [], [len(imgs)], [0], [0],\n"
                   "                                                            [ids], self.processor)\n"
                   "                      for imgs, ids in zip(per_sample, batch[\"input_ids\"].tolist()) if imgs]\n"
                   "        if per_inputs:\n"
                   "            batch.update({k: torch.stack([m[k] for m in per_inputs]) for k in per_inputs[0]})\n"),),
          fix=(*_COLLATOR, "torch.stack", "get_mm_inputs"), repair=True, heldout=True),
    Fault("h9-data-records-qwen-native-markers", "data", "dataset",
          "the records were exported from a Qwen-native pipeline that rendered the chat template's vision markers "
          "(<|vision_start|><|image_pad|><|vision_end|>) into the text instead of the <image> placeholder: no prompt "
          "carries the placeholder its image needs",
          (Replace("{data}", '"content": "<image>', '"content": "<|vision_start|><|image_pad|><|vision_end|>',
                   count=0),),
          fix=("train.json", "<image>"), heldout=True),
    Fault("h9-data-records-answers-cut-at-column-width", "data", "dataset",
          "the answers went through a spreadsheet export whose text column held 32 characters: every answer is cut "
          "mid-sentence ('The image shows a grey square on'), and the model is trained to end its turn there",
          (Replace("{data}", ' on a white background."', ' on"', count=0),),
          fix=("train.json", "answers"), heldout=True),
    Fault("h9-data-records-answers-rich-text-html", "data", "dataset",
          "the answers were exported from the web annotation tool's rich-text field with its HTML: every answer "
          "is wrapped in <p>...</p>, and the model is trained to write the tags",
          (Replace("{data}", '"The image shows', '"<p>The image shows', count=0),
           Replace("{data}", 'background."', 'background.</p>"', count=0)),
          fix=("train.json", "<p>"), heldout=True),
]

CONFIG = [
    Fault("h9-config-validation-file-in-dataset", "config", "yaml",
          "the validation split appended to basic_parameters.dataset ('train.json,data/val.json'), read as 'the "
          "train and validation files': dataset is a list of training files (val_dataset is the validation one), "
          "and the second name is not there (shows when the data path reads its records)",
          (Replace("{config}", "/train.json\n", "/train.json,data/val.json\n"),),
          fix=("dataset", "val_dataset"), repair=True, heldout=True),
    Fault("h9-config-shuffle-off-from-debugging", "config", "yaml",
          "shuffle: false set while reproducing a crash on one sample and never set back: every epoch sees the "
          "records in file order, the same on every run, while the source drew them shuffled",
          (SetLine("{config}", "shuffle", "false"),), fix=("shuffle",), repair=True, heldout=True),
    Fault("h9-config-micro-batch-doubled", "config", "yaml",
          "micro_batch_size: 2 'to use the memory the small model leaves free', while the source trained with one "
          "sample per device: each step averages twice as many samples, half as many steps fit an epoch, and the "
          "curve is not the source's",
          (SetLine("{config}", "micro_batch_size", "2"),), fix=("micro_batch_size",), repair=True, heldout=True),
    Fault("h9-config-attr-formatting-openai", "config", "yaml",
          "attr.formatting: openai added because the records use role / content messages, the OpenAI layout: the "
          "framework reads those through its sharegpt converter with the role and content tags, and builds no "
          "converter for openai (shows when the data path converts its records)",
          (Replace("{config}", "    attr:\n", "    attr:\n      formatting: openai\n"),),
          fix=("formatting", "attr"), repair=True, heldout=True),
    Fault("h9-config-load-and-save-one-folder", "config", "yaml",
          "training.load and training.save both set to ./ckpt/qwen2_vl_sft, the Megatron habit of one folder for "
          "both so a restarted job resumes itself: on the first run the folder is empty, so the weights are read "
          "as a DCP checkpoint that is not there and the HF weights are never loaded",
          (SetLine("{config}", "load", "./ckpt/qwen2_vl_sft"),
           Replace("{config}", "  save_interval:", "  save: ./ckpt/qwen2_vl_sft\n  save_interval:")),
          fix=("load", "save"), repair=True, heldout=True),
    Fault("h9-config-launch-one-device-from-debugging", "config", "launch",
          "NPUS_PER_NODE=1 hard-coded in the launch script during a single-device debugging session and left in: "
          "one rank trains instead of the source's two, the global batch halves and the environment's device count "
          "is no longer read",
          (SetLine("{launch}", "NPUS_PER_NODE", "1", sep="="),), fix=("{launch}", "NPUS_PER_NODE"),
          repair=True, heldout=True),
    Fault("h9-config-launch-etcd-rendezvous", "config", "launch",
          "the torchrun line given --rdzv_backend etcd and the cluster's etcd endpoint from an elastic-training "
          "how-to: on this host there is no etcd server (nor python-etcd), so no rank gets past the rendezvous",
          (Replace("{launch}", _TORCHRUN,
                   _TORCHRUN + "--rdzv_backend etcd --rdzv_endpoint etcd-0.cluster.local:2379 "
                               "--rdzv_id qwen2vl-sft "),),
          fix=("{launch}", "rdzv_backend"), repair=True, heldout=True),
]

ENVIRONMENT = [
    Fault("h9-env-libgomp-static-tls", "environment", "runtime",
          "the runtime on an aarch64 host loads torch's libgomp after other libraries took the static TLS block "
          "(the known fix is LD_PRELOAD of libgomp): importing torch fails",
          runtime=Runtime(sitecustomize=_STATIC_TLS), fix=("static TLS", "LD_PRELOAD", "libgomp"), heldout=True),
    Fault("h9-env-torchvision-other-torch", "environment", "runtime",
          "torch upgraded alone with pip, under a torchvision built for the previous release: importing torchvision "
          "fails on its operators, and transformers imports it when it loads the image processor (shows in the "
          "data path)",
          runtime=Runtime(sitecustomize=_TORCHVISION_ABI), fix=("torchvision", "torchvision::nms"), heldout=True),
    Fault("h9-env-login-node-cpu-time-limit", "environment", "host",
          "the job was started on the cluster's login node, whose profile limits every process's CPU time (ulimit "
          "-t): a rank is killed by SIGXCPU in the middle of training",
          runtime=Runtime(sitecustomize=_CPU_TIME_LIMIT), fix=("CPU time limit", "ulimit", "login node"),
          heldout=True),
    Fault("h9-env-hostname-unresolvable", "environment", "host",
          "the container was started with a generated hostname that no /etc/hosts line or DNS resolves: gloo "
          "cannot find an address for the host's own name when a rank's process group comes up",
          runtime=Runtime(sitecustomize=_HOSTNAME_UNRESOLVED), fix=("hostname", "/etc/hosts", "Unable to find address"),
          heldout=True),
    Fault("h9-env-max-map-count-low", "environment", "host",
          "a hardening profile left vm.max_map_count far below the default: mapping the weights file fails with "
          "ENOMEM although memory is free (shows in the model build)",
          runtime=Runtime(sitecustomize=_MAP_COUNT), fix=("vm.max_map_count", "Cannot allocate memory"),
          heldout=True),
]

FAULTS = [*MODEL, *DATA, *CONFIG, *ENVIRONMENT]
