"""The sixth held-out group (``h6-``): faults written blind by someone who never read the classifier, the failure
catalog, the owner rules, the routing code, the gate code or any routing result, and never ran the classifier or the
routing bench on them while writing. They were written from the green qwen2_vl stand-in migration's delivered files
(plugin package, YAML, launch script), the target's data path (template, mm_plugin, collator, dataset conversion,
dataloader, config manager, trainer), the installed transformers' Qwen2-VL forward and image processor, the real
MindSpeed-MM snapshot's examples (the multi-node launch scripts, the qwen3vl recipes) and the earlier groups' fault
lists (read only to leave out what they already cover), from how public VLM fine-tuning and porting reports go wrong:
a plugin forward that passes its arguments positionally in transformers 4.x's order, one that keeps only the last
logit as the generation wrapper it came from did, a forward run under bf16 autocast from the source's own loop, the
package's __init__ registering the model a second time, the loss divided again by the source's accumulation count,
a NEFTune hook left in from the sibling plugin; a collator that sorts the batch by length after the images were
gathered, one that pads to the tokenizer's 'no limit' model_max_length, a qwen2vl system slot retyped without its
newline, an mm_plugin that still hands the image processor transformers 4.x's ``videos`` argument, records whose
first turn carries the image marker twice or whose answers were exported empty; an image_min_pixels from the model
card's recommendation, a dataset named the LLaMA-Factory way instead of by its path, reentrant recomputation, the
unsharded ``base`` dataloader, a Hub id as the model's path on an offline cluster; a launch line that appends a
Megatron-style override, the deprecated ``torch.distributed.launch`` that puts ``--local-rank`` before the YAML; a
PYTHONHOME left by another Python's profile, a runtime copied onto a host with an older glibc, a Pillow older than
``Image.Resampling``, a container's pids limit that stops gloo starting its threads, a checkpoint folder synced
without its preprocessor_config.json.

Some fail loudly, some only change numbers; several surface in another phase's gate than the owner's (a plugin whose
message names pixel_values, an mm_plugin whose message names a transformers class, a recompute switch that breaks
inside the model's forward, a missing processor file that shows in the data path, a Hub id whose message is about
the network). The public threads read for them are issue reports of the same conditions (Pillow 9.0 without
Image.Resampling under a newer library, a tokenizer's 1e30 model_max_length used as a padding length, torch wheels
needing a newer glibc than the host's, reentrant checkpointing refusing keyword arguments). Each fault was chosen for
being a mechanism no earlier group has and for how users get there, and was checked only for applying to the green
migration and for changing what it computes (or producing its condition), never for how it would be routed. Like the
earlier held-out groups, their figures are reported apart (``--group heldout6``) and a miss is recorded, never fixed
by editing the fault or by a rule keyed on its text.

``repair`` marks the faults whose fix lies in the run's own artifacts (the plugin, the data path's mm_plugin /
template / collator, the YAML, the launch script); the records, the runtime and the host are not the run's to
rewrite."""

from __future__ import annotations

from msmigrate.testbeds.faults.heldout3 import _in_init, _wrapping_forward
from msmigrate.testbeds.faults.injection import Fault, Replace, Runtime, SetLine, after_import
from msmigrate.testbeds.faults.model import CLASS_HEAD

_MODELING = ("{modeling}", "{plugin}")
_COLLATOR = ("func_utils/collator.py", "collator.py")
# the qwen2vl registration's system slot, made unique by the observation slot that follows it (the qwen3 blocks
# share the system slot but format tool turns otherwise)
_QWEN2VL_SYSTEM = ('format_system=StringFormatter(slots=["<|im_start|>system\\n{{content}}<|im_end|>\\n"]),\n'
                   '        format_observation=StringFormatter(slots=["<|im_start|>tool\\n')
_GATHERED_IMAGES = "images = [img for imgs in per_sample for img in imgs]\n"
_LONGEST = 'longest = max(len(f["input_ids"]) for f in features)'
_TRAINER_LINE = "_config.yaml \\\n"


# An old interpreter's home left in the environment (a conda profile's PYTHONHOME): the runtime's interpreter looks
# for its standard library under that prefix and cannot start (a real condition, nothing simulated)
_OTHER_PYTHONHOME = "/usr/local/anaconda3"

# The runtime was built on a newer host and copied here (conda-pack onto a shared disk): torch's extension needs a
# newer glibc than this host has
_GLIBC_TOO_OLD = '''import sys
class _OldGlibc:
    def find_spec(self, name, path=None, target=None):
        if name == "torch._C":
            raise ImportError("/lib64/libc.so.6: version `GLIBC_2.28' not found (required by "
                              "/opt/envs/mm/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so)")
        return None
sys.meta_path.insert(0, _OldGlibc())
'''

# Pillow 9.0 pinned by another tool in the same environment: Image.Resampling (9.1) does not exist yet (taken away
# once Pillow's own ImageOps, which this Pillow needs at import, is loaded: what reads it next is the caller's code)
_PILLOW_BEFORE_RESAMPLING = after_import("PIL.ImageOps", '''def _patch(module):
    image = sys.modules["PIL.Image"]
    image.__dict__.pop("Resampling", None)
    sys.modules["PIL"].__version__ = image.__version__ = "9.0.1"
''')

# The container's pids limit (pids.max) is reached: gloo cannot start its threads when a rank's process group comes
# up, and the C++ exception ends the process (std::terminate: SIGABRT, no core file written here)
_PIDS_LIMIT = after_import("torch.distributed.distributed_c10d", '''def _patch(module):
    if os.environ.get("RANK") is None:
        return
    real = module.init_process_group
    def init_process_group(*args, **kwargs):
        import resource, signal
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        sys.stderr.write("terminate called after throwing an instance of 'std::system_error'\\n"
                         "  what():  Resource temporarily unavailable\\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGABRT)
        return real(*args, **kwargs)
    module.init_process_group = init_process_group
''')

# The checkpoint folder was synced with an include filter (weights, config.json, tokenizer files) that left out
# preprocessor_config.json: every existence check and open of that file finds nothing
_NO_PREPROCESSOR_CONFIG = '''import builtins, errno, io, os
_GONE = "preprocessor_config.json"
def _gone(path):
    try:
        return os.path.basename(os.fsdecode(os.fspath(path))) == _GONE
    except TypeError:
        return False
_isfile, _exists, _open = os.path.isfile, os.path.exists, builtins.open
def _isfile_gone(path):
    return False if _gone(path) else _isfile(path)
def _exists_gone(path):
    return False if _gone(path) else _exists(path)
def _open_gone(file, *args, **kwargs):
    if _gone(file):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fsdecode(os.fspath(file)))
    return _open(file, *args, **kwargs)
os.path.isfile, os.path.exists = _isfile_gone, _exists_gone
builtins.open = io.open = _open_gone
'''

MODEL = [
    Fault("h6-model-forward-positional-4x-order", "model", "plugin",
          "a forward override written against transformers 4.x passes its arguments on positionally in 4.x's order "
          "(output_attentions, output_hidden_states, return_dict after use_cache): on 5.x those positions are "
          "pixel_values, pixel_values_videos and image_grid_thw, which also arrive by keyword",
          (Replace("{modeling}", CLASS_HEAD, CLASS_HEAD +
                   "    def forward(self, input_ids=None, attention_mask=None, position_ids=None, "
                   "past_key_values=None,\n"
                   "                inputs_embeds=None, labels=None, use_cache=None, output_attentions=None,\n"
                   "                output_hidden_states=None, return_dict=None, **kwargs):\n"
                   "        return super().forward(input_ids, attention_mask, position_ids, past_key_values, "
                   "inputs_embeds, labels,\n"
                   "                               use_cache, output_attentions, output_hidden_states, return_dict, "
                   "**kwargs)\n\n"),),
          fix=(*_MODELING, "forward", "keyword"), repair=True, heldout=True),
    Fault("h6-model-logits-to-keep-one", "model", "plugin",
          "the plugin's forward asks for logits_to_keep=1, a memory saving of the generation wrapper it was written "
          "from: the head computes the last position only and the loss gets one logit per sample for a whole "
          "sequence of labels",
          (_wrapping_forward(before="        kwargs.setdefault(\"logits_to_keep\", 1)\n"),),
          fix=(*_MODELING, "logits_to_keep"), repair=True, heldout=True),
    Fault("h6-model-forward-bf16-autocast", "model", "plugin",
          "the plugin's forward runs under torch.autocast(bfloat16), carried over from the source's training loop "
          "that had no mixed-precision policy of its own: the YAML's fp32 compute is overridden in every forward "
          "and the loss comes from bf16 matmuls",
          (Replace("{modeling}", CLASS_HEAD, CLASS_HEAD +
                   "    def forward(self, *args, **kwargs):\n"
                   "        import torch\n\n"
                   "        ids = kwargs.get(\"input_ids\")\n"
                   "        device = ids.device.type if ids is not None else \"cpu\"\n"
                   "        with torch.autocast(device_type=device, dtype=torch.bfloat16):\n"
                   "            return super().forward(*args, **kwargs)\n\n"),),
          fix=(*_MODELING, "autocast", "bfloat16"), repair=True, heldout=True),
    Fault("h6-model-registered-again-in-init", "model", "plugin",
          "the plugin package's __init__.py given an explicit registration 'so ModelHub finds the model' (the style "
          "of another plugin) while the model module's decorator already registers the same id: importing the "
          "plugin registers it twice",
          (Replace("{plugin}/__init__.py", None,
                   '"""Model plugin qwen2_vl: imported through training.plugin."""\n'
                   "from mindspeed_mm.fsdp.utils.register import model_register\n\n"
                   "from .modeling_qwen2_vl import Qwen2VLForConditionalGeneration\n\n"
                   "model_register.register(\"qwen2_vl\")(Qwen2VLForConditionalGeneration)\n"),),
          fix=("{plugin}", "__init__.py", "model_register"), repair=True, heldout=True),
    Fault("h6-model-loss-divided-by-source-accumulation", "model", "plugin",
          "the plugin's forward divides the loss by 8, the source's gradient_accumulation_steps, as the source's "
          "loop did before backward: the framework divides by its own accumulation count as well, so every step's "
          "loss and gradients are an eighth of the source's",
          (_wrapping_forward(after="        if out.loss is not None:\n            out.loss = out.loss / 8\n"),),
          fix=(*_MODELING, "loss", "gradient_accumulation_steps"), repair=True, heldout=True),
    Fault("h6-model-neftune-hook-left-in", "model", "plugin",
          "a NEFTune hook copied from the sibling plugin, whose recipe asked for it, adds uniform noise to the input "
          "embeddings in training mode (alpha 5): this model's source trains without it, so every training forward "
          "sees perturbed embeddings",
          (_in_init("        def _neftune(module, args, output, alpha=5.0):\n"
                    "            if module.training:\n"
                    "                scale = alpha / (output.size(1) * output.size(2)) ** 0.5\n"
                    "                output = output + output.new_empty(output.shape).uniform_(-scale, scale)\n"
                    "            return output\n"
                    "        self.get_input_embeddings().register_forward_hook(_neftune)\n"),),
          fix=(*_MODELING, "register_forward_hook", "neftune"), repair=True, heldout=True),
]

DATA = [
    Fault("h6-data-collator-sorted-after-images", "data", "collator",
          "the collator sorts the batch's samples longest first to pad less (a text SFT habit), after the images "
          "were gathered in the samples' original order: each sample's image tokens get another sample's pixels",
          (Replace("{collator}", _GATHERED_IMAGES,
                   _GATHERED_IMAGES + "        features.sort(key=lambda f: len(f[\"input_ids\"]), reverse=True)\n"),),
          fix=(*_COLLATOR, "sort", "images"), repair=True, heldout=True),
    Fault("h6-data-collator-pads-to-model-max-length", "data", "collator",
          "the collator pads every batch to the tokenizer's model_max_length (padding='max_length' from a "
          "classification script): this tokenizer's model_max_length is transformers' 'no limit' sentinel, about "
          "1e30",
          (Replace("{collator}", _LONGEST, "longest = self.tokenizer.model_max_length  # padding=\"max_length\""),),
          fix=(*_COLLATOR, "model_max_length", "padding"), repair=True, heldout=True),
    Fault("h6-data-template-system-newline-lost", "data", "template",
          "the qwen2vl system slot retyped from the model card's rendered prompt, where the newline after the "
          "system turn's <|im_end|> does not show: the user turn follows on the same line",
          (Replace("{template}", _QWEN2VL_SYSTEM,
                   _QWEN2VL_SYSTEM.replace('{{content}}<|im_end|>\\n"]', '{{content}}<|im_end|>"]')),),
          fix=("template.py", "format_system"), repair=True, heldout=True),
    Fault("h6-data-mm-plugin-videos-argument", "data", "mm_plugin",
          "the mm_plugin passes videos=None to the image processor, as transformers 4.4x's Qwen2-VL image "
          "processor took images and videos in one call: the installed release's image processor takes images "
          "only",
          (Replace("{mm_plugin}", 'processor.image_processor(images, return_tensors="pt")',
                   'processor.image_processor(images, videos=None, return_tensors="pt")'),),
          fix=("mm_plugin.py", "_get_mm_inputs", "videos"), repair=True, heldout=True),
    Fault("h6-data-records-marker-twice", "data", "dataset",
          "the LLaVA-format converter prepends '<image>\\n' to every first user turn, also to the 'Describe the "
          "image.' prompts that already carried the marker: those samples have two markers for one image",
          (Replace("{data}", '"<image>Describe the image."', '"<image>\\n<image>Describe the image."', count=0),),
          fix=("train.json", "<image>"), heldout=True),
    Fault("h6-data-records-empty-answers", "data", "dataset",
          "the annotation export wrote an empty answer where the annotator skipped a sample: the circle samples "
          "train the model to end its turn at once",
          tuple(Replace("{data}", f'"The image shows a {c} circle on a white background."', '""', count=0)
                for c in ("grey", "red", "blue")),
          fix=("train.json", "content"), heldout=True),
]

CONFIG = [
    Fault("h6-config-image-min-pixels-from-model-card", "config", "yaml",
          "image_min_pixels: 200704 (256*28*28) taken from the model card's recommended min_pixels while "
          "image_max_pixels stays 3136: every image is first blown up eightfold past its maximum, then resized "
          "back by the processor, so the pixels the vision tower sees differ from the source's",
          (SetLine("{config}", "image_min_pixels", "200704"),), fix=("image_min_pixels",), repair=True,
          heldout=True),
    Fault("h6-config-dataset-named-not-path", "config", "yaml",
          "dataset: train.json, a name relative to dataset_dir as LLaMA-Factory's dataset_info.json names datasets: "
          "the framework reads dataset as a path, relative to the directory the trainer starts in",
          (SetLine("{config}", "dataset", "train.json"),), fix=("dataset", "dataset_dir"), repair=True,
          heldout=True),
    Fault("h6-config-recompute-reentrant", "config", "yaml",
          "use_reentrant: true added to recompute_plan, the default of an older recipe: reentrant checkpointing "
          "takes no keyword arguments, and the recomputed layers are called with them (shows in the model's "
          "forward)",
          (Replace("{config}", "  recompute_plan:\n", "  recompute_plan:\n    use_reentrant: true\n"),),
          fix=("use_reentrant", "recompute_plan"), repair=True, heldout=True),
    Fault("h6-config-dataloader-mode-base", "config", "yaml",
          "dataloader_mode: base, the value of an evaluation recipe: no batch sampler, so the data is neither "
          "split between the ranks nor shuffled, and every rank trains on the same samples",
          (SetLine("{config}", "dataloader_mode", "base"),), fix=("dataloader_mode",), repair=True, heldout=True),
    Fault("h6-config-model-path-hub-id", "config", "yaml",
          "model.model_name_or_path set to the Hub id Qwen/Qwen2-VL-2B-Instruct from the model card, on a cluster "
          "with no route to the Hub: the config is fetched from the network, which fails",
          (Replace("{config}", "  model_name_or_path: *HF_MODEL_LOAD_PATH\n",
                   "  model_name_or_path: Qwen/Qwen2-VL-2B-Instruct\n"),),
          fix=("model_name_or_path",), repair=True, heldout=True),
    Fault("h6-config-launch-unqualified-override", "config", "launch",
          "train_iters=20 appended to the trainer line, the way Megatron-route scripts pass overrides: the "
          "framework's command-line overrides must name a field it defines, and this one names none",
          (Replace("{launch}", _TRAINER_LINE, _TRAINER_LINE + "    train_iters=20 \\\n"),),
          fix=("{launch}", "train_iters"), repair=True, heldout=True),
    Fault("h6-config-launch-deprecated-launcher", "config", "launch",
          "the trainer started with python -m torch.distributed.launch, copied from an older script: that launcher "
          "passes --local-rank to the script ahead of the YAML, which is then no longer the first argument",
          (Replace("{launch}", "torchrun $DISTRIBUTED_ARGS ",
                   "python -m torch.distributed.launch $DISTRIBUTED_ARGS "),),
          fix=("{launch}", "torchrun", "torch.distributed.launch"), repair=True, heldout=True),
]

ENVIRONMENT = [
    Fault("h6-env-pythonhome-other-prefix", "environment", "runtime",
          "the shell profile of an old Anaconda install exports PYTHONHOME: the runtime's interpreter looks for "
          "its standard library under that prefix and cannot start",
          runtime=Runtime(env={"PYTHONHOME": _OTHER_PYTHONHOME}), fix=("PYTHONHOME",), heldout=True),
    Fault("h6-env-glibc-too-old", "environment", "runtime",
          "the runtime was built on a newer host and copied here (conda-pack onto a shared disk): torch's library "
          "needs a newer glibc than this host has",
          runtime=Runtime(sitecustomize=_GLIBC_TOO_OLD), fix=("GLIBC", "glibc"), heldout=True),
    Fault("h6-env-pillow-before-resampling", "environment", "runtime",
          "another tool in the environment pins Pillow 9.0: PIL.Image.Resampling, which transformers' image "
          "utilities use, does not exist yet",
          runtime=Runtime(sitecustomize=_PILLOW_BEFORE_RESAMPLING), fix=("Pillow", "Resampling"), heldout=True),
    Fault("h6-env-container-pids-limit", "environment", "host",
          "the container's pids limit is reached: a rank cannot start gloo's threads when its process group comes "
          "up and dies of std::terminate (Resource temporarily unavailable)",
          runtime=Runtime(sitecustomize=_PIDS_LIMIT), fix=("pids", "Resource temporarily unavailable", "thread"),
          heldout=True),
    Fault("h6-env-weights-without-preprocessor-config", "environment", "host",
          "the checkpoint folder was synced with an include filter (weights, config.json, tokenizer files) that "
          "left out preprocessor_config.json: the image processor cannot be loaded (shows in the data path)",
          runtime=Runtime(sitecustomize=_NO_PREPROCESSOR_CONFIG), fix=("preprocessor_config.json",), heldout=True),
]

FAULTS = [*MODEL, *DATA, *CONFIG, *ENVIRONMENT]
