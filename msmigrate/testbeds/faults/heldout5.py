"""The fifth held-out group (``h5-``): faults written blind by someone who never read the classifier, the failure
catalog, the owner rules, the routing code, the gate code or any routing result, and never ran the classifier or the
routing bench on them while writing. They were written from the green qwen2_vl stand-in migration's delivered files
(plugin, YAML, launch script), the target's data path (template, mm_plugin, collator, dataset conversion, trainer)
and the earlier groups' fault lists (read only to leave out what they already cover), from how public VLM
fine-tuning and porting reports go wrong: a plugin that recomputes the loss itself without the one-position shift or
with the pad id as its ignore index, a debug layer count left in, pixels normalised a second time in forward, a
vision tower forced onto flash attention, an SDPA flag copied from old remote code; a mm_plugin that hands the
processor images whose file is already closed, a qwen2vl template registered with the reasoning template class of
the block it was copied from, another release's default system prompt, a collator that marks the vision start/end
markers as image tokens for the multimodal rope, records whose answers carry the serving template's end token or
whose prompts were re-exported as OpenAI content parts; special tokens split by the tokenizer, the weights' load
path cleared under a meta-device build, a DCP load format on an HF folder, a deprecated collator key that disagrees
with the new one; a launch script saved with CRLF line ends, one made strict with ``set -euo pipefail`` above a
guarded ``source``, a master port taken from a scheduler variable that is not set; a runtime that exports
PYTHONOPTIMIZE=2, pydantic 1.x in the runtime, a torch older than ``torch.accelerator``, weights that are git-lfs
pointer files, a torch wheel built for a newer CPU than the host's.

Some fail loudly, some only change numbers; several surface in another phase's gate than the owner's (a YAML switch
that breaks the model's image-token count, a load format that reads like a missing file, a plugin attention setting
whose message names a package, a collator's token types that break the model's rope index, an exported variable
that fails inside transformers' docstring handling). Like the earlier held-out groups, their figures are reported
apart (``--group heldout5``) and a miss is recorded, never fixed by editing the fault or by a rule keyed on its text.

``repair`` marks the faults whose fix lies in the run's own artifacts (the plugin, the data path's mm_plugin /
template / collator, the YAML, the launch script); the records, the runtime and the host are not the run's to
rewrite."""

from __future__ import annotations

from msmigrate.testbeds.faults.heldout3 import _wrapping_forward
from msmigrate.testbeds.faults.heldout4 import _TEXT_CONFIG, _before_init
from msmigrate.testbeds.faults.injection import Fault, Replace, Runtime, SetLine, after_import
from msmigrate.testbeds.faults.model import CLASS_HEAD

_MODELING = ("{modeling}", "{plugin}")
_COLLATOR = ("func_utils/collator.py", "collator.py")
# the qwen2vl template's media plugin line (its plugin name makes it unique among the registrations) and the
# registration's closing parenthesis after it
_QWEN2VL_MM_PLUGIN = ('mm_plugin=get_mm_plugin(name="qwen2_vl", image_token="<|image_pad|>", '
                      'video_token="<|video_pad|>"),\n)')
_IMAGE_TOKEN_TYPES = 'batch["mm_token_type_ids"] = (batch["input_ids"] == image_token_id).long()'


def _loss_after_forward(expression: str) -> Replace:
    """A forward override that replaces the loss the model computed with ``expression`` (``logits``, ``labels``)."""
    return _wrapping_forward(after="        labels = kwargs.get(\"labels\")\n        if labels is not None:\n"
                                   "            logits = out.logits.float()\n"
                                   f"            out.loss = {expression}\n")


# pydantic 1.x resolved ahead of 2.x (pinned by another tool in the same environment): the 2.x names are not there
_PYDANTIC_V1 = after_import("pydantic", '''def _patch(module):
    real = module.__dict__.get("__getattr__")
    gone = ("ConfigDict", "model_validator", "field_validator", "computed_field", "TypeAdapter")
    for name in gone:
        module.__dict__.pop(name, None)
    def __getattr__(name):
        if name in gone:
            raise AttributeError(f"module 'pydantic' has no attribute '{name}'")
        if real is None:
            raise AttributeError(f"module 'pydantic' has no attribute '{name}'")
        return real(name)
    module.__getattr__ = __getattr__
    module.VERSION = module.__version__ = "1.10.13"
''')

# torch 2.5 (the release an older torch_npu pairs with): no torch.accelerator module yet
_TORCH_WITHOUT_ACCELERATOR = after_import("torch", '''def _patch(module):
    module.__dict__.pop("accelerator", None)
    sys.modules["torch.accelerator"] = None
''')

# The checkpoint folder was cloned without git-lfs: model.safetensors is a 134-byte pointer file, whose first eight
# bytes the reader takes for a header length far beyond the file
_LFS_POINTER_WEIGHTS = after_import("safetensors", '''def _patch(module):
    real = module.safe_open
    error = getattr(module, "SafetensorError", OSError)
    def safe_open(filename, *args, **kwargs):
        name = os.path.basename(str(filename))
        if name.startswith("model") and name.endswith(".safetensors"):
            raise error("Error while deserializing header: HeaderTooLarge")
        return real(filename, *args, **kwargs)
    module.safe_open = safe_open
''')

# A torch wheel built for AVX-512 hosts on a host without it: the first kernel that uses those instructions kills the
# process (no core file written here)
_ILLEGAL_INSTRUCTION = after_import("torch", '''def _patch(module):
    import resource, signal
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGILL)
''')

MODEL = [
    Fault("h5-model-loss-unshifted", "model", "plugin",
          "the plugin's forward recomputes the loss from the logits and the labels without the one-position shift "
          "(the source's dataset shifted its labels itself): every position is trained to predict its own token",
          (_loss_after_forward("torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), "
                               "ignore_index=-100)"),),
          fix=(*_MODELING, "forward", "shift"), repair=True, heldout=True),
    Fault("h5-model-loss-ignore-pad-id", "model", "plugin",
          "the plugin's forward recomputes the loss with ignore_index set to the pad token id, as the source's "
          "training script padded its labels with it: the framework's -100 labels are out of the loss's range",
          (_loss_after_forward("torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), "
                               "labels[:, 1:].flatten(), ignore_index=self.config.get_text_config().pad_token_id)"),),
          fix=(*_MODELING, "ignore_index", "-100"), repair=True, heldout=True),
    Fault("h5-model-debug-layer-count", "model", "plugin",
          "num_hidden_layers = 1 left in the plugin's __init__ from a quick smoke test: the language model is built "
          "with one decoder layer and the checkpoint's other layers are dropped as unexpected keys",
          (_before_init(_TEXT_CONFIG + "        text.num_hidden_layers = 1\n"),),
          fix=(*_MODELING, "num_hidden_layers"), repair=True, heldout=True),
    Fault("h5-model-pixels-normalised-twice", "model", "plugin",
          "the plugin's forward maps pixel_values to [-1, 1] as the source's SigLIP-style forward did, while the "
          "processor has already normalised them with the checkpoint's mean and std",
          (_wrapping_forward(before="        pixels = kwargs.get(\"pixel_values\")\n        if pixels is not None:\n"
                                    "            kwargs[\"pixel_values\"] = (pixels - 0.5) / 0.5\n"),),
          fix=(*_MODELING, "pixel_values"), repair=True, heldout=True),
    Fault("h5-model-vision-flash-attention", "model", "plugin",
          "the plugin forces the vision config onto flash_attention_2 ('the vision tower needs varlen attention', "
          "true of the NPU port it was copied from): this runtime has no flash-attn, whatever the YAML asks for",
          (_before_init("        config.vision_config._attn_implementation = \"flash_attention_2\"\n"),),
          fix=(*_MODELING, "_attn_implementation", "flash_attention_2"), repair=True, heldout=True),
    Fault("h5-model-sdpa-unsupported-flag", "model", "plugin",
          "_supports_sdpa = False copied into the plugin class from the source's remote code, written before its "
          "attention supported SDPA: the YAML's sdpa is refused for a model that has it",
          (Replace("{modeling}", CLASS_HEAD, CLASS_HEAD + "    _supports_sdpa = False\n"),),
          fix=(*_MODELING, "_supports_sdpa"), repair=True, heldout=True),
]

DATA = [
    Fault("h5-data-mm-plugin-image-closed", "data", "mm_plugin",
          "a tidy-up of the mm_plugin's image loading drops the .copy() inside the `with Image.open(...)` block: the "
          "images handed to the processor are lazy PIL images whose file is already closed",
          (Replace("{mm_plugin}", "out.append(self._preprocess_image(opened.copy(), **kwargs))",
                   "out.append(self._preprocess_image(opened, **kwargs))"),),
          fix=("mm_plugin.py", "_regularize_images", "copy"), repair=True, heldout=True),
    Fault("h5-data-template-reasoning-class", "data", "template",
          "the qwen2vl registration rewritten from the qwen3_vl block keeps template_class=ReasoningTemplate: with "
          "enable_thinking false every answer is trained behind an empty <think></think> block Qwen2-VL never emits",
          (Replace("{template}", _QWEN2VL_MM_PLUGIN,
                   _QWEN2VL_MM_PLUGIN[:-1] + "    template_class=ReasoningTemplate,\n)"),),
          fix=("template.py", "template_class", "ReasoningTemplate"), repair=True, heldout=True),
    Fault("h5-data-template-other-release-system", "data", "template",
          "the qwen2vl template's default system prompt replaced by Qwen2.5's ('You are Qwen, created by Alibaba "
          "Cloud...'), read off the wrong model card: every sample is trained under a system prompt the source "
          "never used",
          (Replace("{template}", 'default_system="You are a helpful assistant.",',
                   'default_system="You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",'),),
          fix=("template.py", "default_system"), repair=True, heldout=True),
    Fault("h5-data-collator-image-span-with-markers", "data", "collator",
          "the collator marks the whole image span, <|vision_start|> and <|vision_end|> included, as image tokens "
          "in mm_token_type_ids: the model's multimodal rope gets two more image positions per image than the "
          "grid has (shows in the model's forward)",
          (Replace("{collator}", _IMAGE_TOKEN_TYPES,
                   "markers = self.tokenizer.convert_tokens_to_ids([self.template.mm_plugin.vision_bos_token, "
                   "self.template.mm_plugin.vision_eos_token])\n            batch[\"mm_token_type_ids\"] = "
                   "torch.isin(batch[\"input_ids\"], torch.tensor([image_token_id, *markers])).long()"),),
          fix=(*_COLLATOR, "mm_token_type_ids"), repair=True, heldout=True),
    Fault("h5-data-records-answers-keep-end-token", "data", "dataset",
          "the answers were exported from serving logs with the chat template's <|im_end|> still attached: each "
          "answer is trained to end twice",
          (Replace("{data}", ' on a white background."', ' on a white background.<|im_end|>"', count=0),),
          fix=("train.json", "<|im_end|>"), heldout=True),
    Fault("h5-data-records-content-parts", "data", "dataset",
          "the 'Describe the image.' samples were re-exported by a second annotation tool in the OpenAI "
          "content-parts format (a list of typed parts): those prompts carry no <image> marker string",
          (Replace("{data}", '"<image>Describe the image."',
                   '[{"type": "image"}, {"type": "text", "text": "Describe the image."}]', count=0),),
          fix=("train.json", "content", "<image>"), heldout=True),
]

CONFIG = [
    Fault("h5-config-split-special-tokens", "config", "yaml",
          "split_special_tokens: true copied from a text-only recipe that guarded against prompt injection: "
          "<|image_pad|> and the chat markers are tokenised as plain text, so no image token reaches the model",
          (SetLine("{config}", "split_special_tokens", "true"),), fix=("split_special_tokens",), repair=True,
          heldout=True),
    Fault("h5-config-load-cleared-meta-init", "config", "yaml",
          "load: null, since model_name_or_path 'already names the weights': under init_model_with_meta_device the "
          "model is then initialised at random and the checkpoint is never read",
          (SetLine("{config}", "load", "null"),), fix=("load", "init_model_with_meta_device"), repair=True,
          heldout=True),
    Fault("h5-config-load-format-dcp", "config", "yaml",
          "load_format: dcp kept from the example it was copied from, which resumed a DCP checkpoint: the HF weight "
          "folder is read as a DCP checkpoint directory",
          (SetLine("{config}", "load_format", "dcp"),), fix=("load_format",), repair=True, heldout=True),
    Fault("h5-config-collator-deprecated-alias", "config", "yaml",
          "model_name: qwen2vl kept under collate_param from an older example beside the newer collator_id: the "
          "deprecated key names another collator than collator_id",
          (Replace("{config}", "      collator_id: qwen3vl\n",
                   "      collator_id: qwen3vl\n      model_name: qwen2vl\n"),),
          fix=("model_name", "collator_id"), repair=True, heldout=True),
    Fault("h5-config-launch-crlf", "config", "launch",
          "the launch script edited on a Windows laptop and copied over with CRLF line ends: every line ends in a "
          "carriage return, the variables, the continuation backslashes and the YAML path with it",
          (Replace("{launch}", "\n", "\r\n", count=0),), fix=("{launch}", "CRLF", "\\r"), repair=True,
          heldout=True),
    Fault("h5-config-launch-strict-mode", "config", "launch",
          "set -euo pipefail added at the top 'for safety': the toolkit `source` line, guarded only by 2>/dev/null, "
          "fails on a host without the Ascend toolkit and the script exits before torchrun, printing nothing",
          (Replace("{launch}", "#!/bin/bash\n", "#!/bin/bash\nset -euo pipefail\n"),),
          fix=("{launch}", "set -e", "source"), repair=True, heldout=True),
    Fault("h5-config-launch-port-from-scheduler", "config", "launch",
          "MASTER_PORT=${PORT} taken from the cluster's job template, where the scheduler exports PORT: here "
          "nothing sets it and --master_port swallows the next word of the torchrun line",
          (SetLine("{launch}", "MASTER_PORT", "${PORT}", sep="="),), fix=("{launch}", "MASTER_PORT", "PORT"),
          repair=True, heldout=True),
]

ENVIRONMENT = [
    Fault("h5-env-pythonoptimize-2", "environment", "runtime",
          "a production container profile exports PYTHONOPTIMIZE=2 ('faster Python'): docstrings are stripped, "
          "and transformers builds its model output classes from their docstrings",
          runtime=Runtime(env={"PYTHONOPTIMIZE": "2"}), fix=("PYTHONOPTIMIZE", "docstring"), heldout=True),
    Fault("h5-env-pydantic-v1", "environment", "runtime",
          "another tool in the shared environment pins pydantic<2: the 1.x release shadows the 2.x API the "
          "framework's argument classes are written against",
          runtime=Runtime(sitecustomize=_PYDANTIC_V1), fix=("pydantic", "ConfigDict"), heldout=True),
    Fault("h5-env-torch-without-accelerator", "environment", "runtime",
          "the runtime carries torch 2.5, the release an older torch_npu pairs with: torch.accelerator, which the "
          "framework's trainer and seeding use, does not exist yet",
          runtime=Runtime(sitecustomize=_TORCH_WITHOUT_ACCELERATOR), fix=("torch", "accelerator"), heldout=True),
    Fault("h5-env-weights-lfs-pointers", "environment", "host",
          "the checkpoint was cloned on a host without git-lfs: model.safetensors is a pointer file, and reading it "
          "fails on its header",
          runtime=Runtime(sitecustomize=_LFS_POINTER_WEIGHTS), fix=("lfs", "git lfs", "model.safetensors"),
          heldout=True),
    Fault("h5-env-illegal-instruction", "environment", "host",
          "the runtime's torch wheel was built for AVX-512 hosts and this host's CPU lacks it: every process that "
          "imports torch dies of SIGILL (Illegal instruction)",
          runtime=Runtime(sitecustomize=_ILLEGAL_INSTRUCTION), fix=("SIGILL", "Illegal instruction", "CPU"),
          heldout=True),
]

FAULTS = [*MODEL, *DATA, *CONFIG, *ENVIRONMENT]
