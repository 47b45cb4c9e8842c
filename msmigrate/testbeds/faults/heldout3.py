"""The third held-out group (``h3-``): faults written blind by someone who never read the classifier, the failure
catalog, the owner rules, the routing code or any routing result, and never ran the classifier or the routing bench
on them. They were written from the green qwen2_vl stand-in migration's delivered files (plugin, YAML, launch script)
and the target's data path (template, mm_plugin, collator, dataset conversion), read for where a port to
MindSpeed-MM breaks in ways the earlier groups do not cover, and from how public VLM fine-tuning reports go wrong:
a plugin built on the backbone class without the LM head, an embedding scale or a logit temperature carried over
from a sibling model, an inverted embedding tie, a frozen tower in code, a grid or a media key renamed; a template
without its end-of-turn token or with another family's eos convention or media plugin, images not normalised, media
not expanded, padding attended, a fake image that replaces real ones, media paths resolved against the working
directory, a records file with a byte-order mark; the YAML's optimizer betas, a zero learning rate, a tensor-parallel
size the route does not have, a pad-label switch, a one-sample dataset, a freeze pattern that matches the whole
backbone, a half-precision mixed precision, checkpoint-loading switches; a launch line broken by a trailing space,
the trainer started without torchrun; an exported variable that changes the data path's placeholder, an older
MindSpeed shadowing the one the route needs, a truncated transformers install, an old huggingface-hub, a collective
that times out on an overloaded host, a stale NFS handle on the weights, a Pillow built without zlib.

Some fail loudly, some only change numbers; several surface in another phase's gate than the owner's (a YAML switch
that shows in the data path's labels, a template whose media plugin breaks the model's forward, an exported
variable that breaks the data path, a broken install that fails the model phase's import). Like ``heldout`` and
``heldout2``, their figures are reported apart (``--group heldout3``) and a miss is recorded, never fixed by editing
the fault or by a rule keyed on its text.

``repair`` marks the faults whose fix lies in the run's own artifacts (the plugin, the data path's mm_plugin /
template / collator, the YAML, the launch script); the records, the target's dataset conversion code, the runtime
and the host are not the run's to rewrite."""

from __future__ import annotations

from msmigrate.testbeds.faults.injection import Fault, Replace, Runtime, SetLine, after_import
from msmigrate.testbeds.faults.model import CLASS_HEAD

_MODELING = ("{modeling}", "{plugin}")
_COLLATOR = ("func_utils/collator.py", "collator.py")
_CONVERT = "mindspeed_mm/fsdp/data/data_utils/func_utils/convert.py"
# the green plugin's __init__ calls its parent first; lines added after it run on the built model
_SUPER_INIT_CALL = "        super().__init__(config, *args, **kwargs)\n"
# the qwen2vl template's registration (its name makes the anchor unique among the families sharing its slots)
_QWEN2VL_ASSISTANT = ('name="qwen2vl",\n    params=RegisterParams(\n        format_user=StringFormatter('
                      'slots=["<|im_start|>user\\n{{content}}<|im_end|>\\n<|im_start|>assistant\\n"]),\n'
                      '        format_assistant=StringFormatter(slots=["{{content}}<|im_end|>\\n"]),\n')
_QWEN2VL_PLUGIN = 'replace_eos=True),\n    mm_plugin=get_mm_plugin(name="qwen2_vl", '
_LAUNCH_TRAINER = "torchrun $DISTRIBUTED_ARGS mindspeed_mm/fsdp/train/trainer.py \\\n"


def _in_init(lines: str) -> Replace:
    """Statements the plugin's __init__ runs right after its parent built the model."""
    return Replace("{modeling}", _SUPER_INIT_CALL, _SUPER_INIT_CALL + lines)


def _wrapping_forward(before: str = "", after: str = "") -> Replace:
    """A forward override: ``before`` edits ``kwargs``, the upstream forward runs, ``after`` edits ``out``."""
    return Replace("{modeling}", CLASS_HEAD,
                   CLASS_HEAD + "    def forward(self, *args, **kwargs):\n        import torch  # noqa: F401\n\n"
                   + before + "        out = super().forward(*args, **kwargs)\n" + after + "        return out\n\n")


# An older MindSpeed release (before its FSDP2 package) installed ahead of the one the route needs
_MINDSPEED_WITHOUT_FSDP = '''import sys
class _OlderMindSpeed:
    def find_spec(self, name, path=None, target=None):
        if name == "mindspeed.fsdp" or name.startswith("mindspeed.fsdp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _OlderMindSpeed())
'''

# A pip upgrade interrupted by a full disk left transformers' Qwen2-VL modeling file cut mid-statement: every import
# of it is a syntax error in site-packages
_TRUNCATED_MODELING = '''import importlib.machinery, sys
class _Truncated:
    def find_spec(self, name, path=None, target=None):
        if name != "transformers.models.qwen2_vl.modeling_qwen2_vl":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        origin = spec.origin
        def exec_module(module):
            raise SyntaxError("'(' was never closed",
                              (origin, 1187, 45, "        position_ids, rope_deltas = self.get_rope_index(\\n"))
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, _Truncated())
'''

# Another project pinned huggingface-hub to an old release in the same environment: transformers' own dependency
# check refuses to import
_OLD_HUB = '''import importlib.metadata as _metadata
_real_version = _metadata.version
def _version(name):
    if name.replace("_", "-").lower() == "huggingface-hub":
        return "0.20.3"
    return _real_version(name)
_metadata.version = _version
'''

# An oversubscribed host: rank 1's first collective never completes within gloo's timeout
_COLLECTIVE_TIMEOUT = after_import("torch.distributed.distributed_c10d", '''def _patch(module):
    if os.environ.get("RANK") != "1":
        return
    def timed_out(*args, **kwargs):
        raise RuntimeError("[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
                           "1800000ms for recv operation to complete")
    for name in ("all_reduce", "reduce_scatter_tensor", "all_gather_into_tensor", "all_gather", "broadcast"):
        setattr(module, name, timed_out)
''')

# The weights live on an NFS export that was remounted under the job: every open of a safetensors file fails
_STALE_NFS_HANDLE = after_import("safetensors", '''def _patch(module):
    import errno
    def safe_open(filename, *args, **kwargs):
        raise OSError(errno.ESTALE, "Stale file handle", str(filename))
    module.safe_open = safe_open
''')

# Pillow built from source on a host without zlib headers: PNG decoding is missing
_PILLOW_WITHOUT_ZLIB = after_import("PIL.Image", '''def _patch(module):
    real = module._getdecoder
    def _getdecoder(mode, decoder_name, args, extra=()):
        if decoder_name == "zip":
            raise OSError("decoder zip not available")
        return real(mode, decoder_name, args, extra)
    module._getdecoder = _getdecoder
''')

MODEL = [
    Fault("h3-model-backbone-class-without-head", "model", "plugin",
          "the plugin subclasses Qwen2VLModel, the first class of the modeling file, instead of the class with the "
          "LM head: the registered model has no lm_head and returns hidden states, no logits",
          (Replace("{modeling}", "    Qwen2VLForConditionalGeneration as _UpstreamQwen2VLForConditionalGeneration,\n",
                   "    Qwen2VLModel as _UpstreamQwen2VLForConditionalGeneration,\n"),),
          fix=(*_MODELING, "Qwen2VLForConditionalGeneration"), repair=True, heldout=True),
    Fault("h3-model-vocab-resized-in-init", "model", "plugin",
          "the plugin's __init__ resizes the token embeddings by two rows for grounding tokens a sibling port "
          "added: the embedding and head no longer match the checkpoint's shapes",
          (_in_init("        self.resize_token_embeddings(config.get_text_config(decoder=True).vocab_size + 2)\n"),),
          fix=(*_MODELING, "resize_token_embeddings", "vocab_size"), repair=True, heldout=True),
    Fault("h3-model-logits-temperature", "model", "plugin",
          "forward divides the logits by 0.7, the generation config's sampling temperature, copied from an "
          "inference wrapper: the training loss is computed on sharpened logits",
          (_wrapping_forward(after="        out.logits = out.logits / 0.7\n"),),
          fix=(*_MODELING, "logits"), repair=True, heldout=True),
    Fault("h3-model-embedding-scaled", "model", "plugin",
          "a forward hook scales the token embeddings by sqrt(hidden_size), the Gemma convention carried over from "
          "the sibling plugin this one was started from",
          (_in_init("        self.get_input_embeddings().register_forward_hook(\n"
                    "            lambda module, args, output: output * output.shape[-1] ** 0.5)\n"),),
          fix=(*_MODELING, "get_input_embeddings", "register_forward_hook"), repair=True, heldout=True),
    Fault("h3-model-vision-frozen-in-code", "model", "plugin",
          "forward freezes the vision tower before each step (left from an experiment that trained the rest "
          "only), while the YAML's freeze list is empty: the vision encoder never trains and no config says so",
          (_wrapping_forward(before="        self.model.visual.requires_grad_(False)\n"),),
          fix=(*_MODELING, "requires_grad_", "visual"), repair=True, heldout=True),
    Fault("h3-model-embedding-tie-inverted", "model", "plugin",
          "the tie the plugin states at both config levels is negated in a cleanup ('not tied' read as the "
          "default): the trainer re-ties an untied checkpoint's head to its input embedding",
          (Replace("{modeling}", "                cfg.tie_word_embeddings = tied\n",
                   "                cfg.tie_word_embeddings = not tied\n"),),
          fix=(*_MODELING, "tie_word_embeddings"), repair=True, heldout=True),
    Fault("h3-model-pixel-values-renamed", "model", "plugin",
          "forward passes the images under `images`, the keyword of the LLaVA port this plugin was adapted from: "
          "the upstream forward never sees pixel_values",
          (_wrapping_forward(before="        if \"pixel_values\" in kwargs:\n"
                                    "            kwargs[\"images\"] = kwargs.pop(\"pixel_values\")\n"),),
          fix=(*_MODELING, "pixel_values"), repair=True, heldout=True),
    Fault("h3-model-grid-premerged", "model", "plugin",
          "forward divides image_grid_thw's height and width by the spatial merge size, as a later processor "
          "reports them already merged: the vision tower's grid no longer matches its patches",
          (_wrapping_forward(before="        grid = kwargs.get(\"image_grid_thw\")\n"
                                    "        if grid is not None:\n"
                                    "            kwargs[\"image_grid_thw\"] = grid // torch.tensor([1, 2, 2], "
                                    "dtype=grid.dtype, device=grid.device)\n"),),
          fix=(*_MODELING, "image_grid_thw"), repair=True, heldout=True),
]

DATA = [
    Fault("h3-data-mm-plugin-no-normalize", "data", "mm_plugin",
          "the mm_plugin asks the image processor not to normalise, because an augmentation step (since removed) "
          "used to normalise: the pixels reach the vision tower in [0, 1] instead of mean/std units",
          (Replace("{mm_plugin}", 'mm_inputs.update(processor.image_processor(images, return_tensors="pt"))',
                   'mm_inputs.update(processor.image_processor(images, return_tensors="pt", do_normalize=False))'),),
          fix=("mm_plugin.py", "do_normalize", "_get_mm_inputs"), repair=True, heldout=True),
    Fault("h3-data-mm-plugin-no-expansion", "data", "mm_plugin",
          "expand_mm_tokens defaulted to False, copied from a plugin whose model expands media tokens itself: each "
          "image gets one image token (shows in the model's forward, which counts the image features)",
          (Replace("{mm_plugin}", "    expand_mm_tokens: bool = True\n", "    expand_mm_tokens: bool = False\n"),),
          fix=("mm_plugin.py", "expand_mm_tokens"), repair=True, heldout=True),
    Fault("h3-data-template-answer-without-im-end", "data", "template",
          "the qwen2vl assistant slot lost its <|im_end|> (trimmed as a 'duplicate' of the stop word): the labels "
          "never teach the model to end its turn",
          (Replace("{template}", _QWEN2VL_ASSISTANT,
                   _QWEN2VL_ASSISTANT.replace('slots=["{{content}}<|im_end|>\\n"]', 'slots=["{{content}}\\n"]')),),
          fix=("template.py", "format_assistant"), repair=True, heldout=True),
    Fault("h3-data-template-efficient-eos", "data", "template",
          "efficient_eos copied into the qwen2vl registration from the GLM one below it: an eos is appended to "
          "every sample and put in the first prompt label",
          (Replace("{template}", _QWEN2VL_PLUGIN,
                   _QWEN2VL_PLUGIN.replace("replace_eos=True),", "replace_eos=True,\n        efficient_eos=True),")),),
          fix=("template.py", "efficient_eos"), repair=True, heldout=True),
    Fault("h3-data-template-base-mm-plugin", "data", "template",
          "the qwen2vl template registered with the base mm_plugin (the default argument kept): <image> is never "
          "expanded into image tokens, while the collator still sends the pixels (shows in the model's forward)",
          (Replace("{template}", 'mm_plugin=get_mm_plugin(name="qwen2_vl", ',
                   'mm_plugin=get_mm_plugin(name="base", '),),
          fix=("template.py", "mm_plugin", "get_mm_plugin"), repair=True, heldout=True),
    Fault("h3-data-collator-attends-padding", "data", "collator",
          "the collator pads the attention mask with ones (the pad value of input_ids' 'real token' convention in "
          "another codebase): padded positions are attended",
          (Replace("{collator}", '("attention_mask", 0)', '("attention_mask", 1)'),),
          fix=(*_COLLATOR, "attention_mask"), repair=True, heldout=True),
    Fault("h3-data-collator-fake-image-always", "data", "collator",
          "the fake image made unconditional (an FSDP 'every rank runs the vision tower' fix from a forum thread): "
          "it replaces the sample's real images while their tokens stay in the text",
          (Replace("{collator}", "if not images and self.template.mm_plugin.image_token is not None",
                   "if self.template.mm_plugin.image_token is not None"),),
          fix=(*_COLLATOR, "_fake_image"), repair=True, heldout=True),
    Fault("h3-data-convert-media-from-cwd", "data", "dataset",
          "the dataset conversion resolves media paths against the working directory instead of dataset_dir "
          "(an edit made to run a script from the data folder)",
          (Replace(_CONVERT, "path = os.path.join(dataset_dir, item)", "path = os.path.abspath(item)"),),
          fix=("convert.py", "_media", "dataset_dir"), heldout=True),
    Fault("h3-data-records-utf8-bom", "data", "dataset",
          "the records re-saved by a spreadsheet tool as 'UTF-8 with BOM': the file opens with a byte-order mark "
          "that the JSON reader refuses",
          (Replace("{data}", "[\n {", "\ufeff[\n {", count=1),),
          fix=("train.json", "BOM", "utf-8"), heldout=True),
]

CONFIG = [
    Fault("h3-config-adam-betas-swapped", "config", "yaml",
          "adam_beta1 and adam_beta2 added with their values swapped (0.999, 0.9): the first moment barely moves "
          "and the second forgets fast",
          (Replace("{config}", "  optimizer: adamw\n",
                   "  optimizer: adamw\n  adam_beta1: 0.999\n  adam_beta2: 0.9\n"),),
          fix=("adam_beta1", "adam_beta2"), repair=True, heldout=True),
    Fault("h3-config-lr-zero-from-dry-run", "config", "yaml",
          "lr: 0.0 left from a dry run that checked the data path without moving the weights: the loss never "
          "changes",
          (SetLine("{config}", "lr", "0.0"),), fix=("lr", "training.lr"), repair=True, heldout=True),
    Fault("h3-config-tensor-parallel-from-big-recipe", "config", "yaml",
          "tensor_parallel_size: 2 copied from the 72B recipe: the FSDP2 plugin route has no tensor parallelism",
          (SetLine("{config}", "tensor_parallel_size", "2"),), fix=("tensor_parallel_size",), repair=True,
          heldout=True),
    Fault("h3-config-pad-labels-trained", "config", "yaml",
          "ignore_pad_token_for_loss switched off: the collator pads the labels with the pad token id, so the "
          "padding is trained as answer text (shows in the data path's labels)",
          (SetLine("{config}", "ignore_pad_token_for_loss", "false"),), fix=("ignore_pad_token_for_loss",),
          repair=True, heldout=True),
    Fault("h3-config-max-samples-smoke-test", "config", "yaml",
          "max_samples: 1 left from a smoke test: one sample for two ranks, so the sampler yields no batch "
          "(shows when the data path builds its loader)",
          (SetLine("{config}", "max_samples", "1"),), fix=("max_samples",), repair=True, heldout=True),
    Fault("h3-config-freeze-whole-backbone", "config", "yaml",
          "freeze: [model] written to freeze 'the vision model': the pattern names the whole backbone, so only "
          "lm_head trains",
          (SetLine("{config}", "freeze", "[model]"),), fix=("freeze",), repair=True, heldout=True),
    Fault("h3-config-param-dtype-fp16", "config", "yaml",
          "param_dtype: fp16 from a GPU recipe, with no loss scaling on this route: the forward runs in half "
          "precision and small gradients underflow",
          (SetLine("{config}", "param_dtype", "fp16"),), fix=("param_dtype", "fsdp_plan"), repair=True,
          heldout=True),
    Fault("h3-config-load-optimizer-from-hf", "config", "yaml",
          "no_load_optim switched to false to 'resume the optimizer too', while training.load is an HF weights "
          "folder that holds no optimizer state",
          (SetLine("{config}", "no_load_optim", "false"),), fix=("no_load_optim",), repair=True, heldout=True),
    Fault("h3-config-launch-trailing-space", "config", "launch",
          "a trailing space after the trainer line's backslash: the line continuation breaks, the trainer starts "
          "without its YAML and the shell tries to run the YAML path as a command",
          (Replace("{launch}", _LAUNCH_TRAINER, _LAUNCH_TRAINER.replace(" \\\n", " \\ \n")),),
          fix=("{launch}", "trainer.py"), repair=True, heldout=True),
    Fault("h3-config-launch-python-not-torchrun", "config", "launch",
          "the launch script starts the trainer with plain python (a debugging edit left in): no rank variables "
          "are set for it",
          (Replace("{launch}", "torchrun $DISTRIBUTED_ARGS ", "python "),),
          fix=("{launch}", "torchrun"), repair=True, heldout=True),
]

ENVIRONMENT = [
    Fault("h3-env-image-placeholder-exported", "environment", "runtime",
          "the user's shell profile exports IMAGE_PLACEHOLDER=<img> for another project's datasets: the data path "
          "looks for <img> markers and counts none in these records",
          runtime=Runtime(env={"IMAGE_PLACEHOLDER": "<img>"}), fix=("IMAGE_PLACEHOLDER",), heldout=True),
    Fault("h3-env-mindspeed-without-fsdp", "environment", "runtime",
          "an older MindSpeed release, without its fsdp package, is installed ahead of the one the route needs",
          runtime=Runtime(sitecustomize=_MINDSPEED_WITHOUT_FSDP), fix=("mindspeed", "MindSpeed"), heldout=True),
    Fault("h3-env-transformers-install-truncated", "environment", "runtime",
          "a pip upgrade interrupted by a full disk left transformers' Qwen2-VL modeling file cut mid-statement "
          "(shows when the model phase's plugin imports it)",
          runtime=Runtime(sitecustomize=_TRUNCATED_MODELING), fix=("transformers", "reinstall"), heldout=True),
    Fault("h3-env-huggingface-hub-pinned-old", "environment", "runtime",
          "another project in the same environment pinned huggingface-hub to 0.20.3: transformers refuses to import",
          runtime=Runtime(sitecustomize=_OLD_HUB), fix=("huggingface-hub", "huggingface_hub"), heldout=True),
    Fault("h3-env-collective-timeout", "environment", "host",
          "the host is oversubscribed by another job: rank 1's first collective times out in gloo",
          runtime=Runtime(sitecustomize=_COLLECTIVE_TIMEOUT), fix=("Timed out", "timeout", "gloo"), heldout=True),
    Fault("h3-env-weights-stale-nfs-handle", "environment", "host",
          "the checkpoint folder is on an NFS export remounted under the job: opening the weights fails with a "
          "stale file handle (shows in the model phase's build)",
          runtime=Runtime(sitecustomize=_STALE_NFS_HANDLE), fix=("Stale file handle", "NFS", "mount"), heldout=True),
    Fault("h3-env-pillow-without-zlib", "environment", "runtime",
          "Pillow built from source on a host without zlib headers: PNG images cannot be decoded (shows when the "
          "data path opens the first image)",
          runtime=Runtime(sitecustomize=_PILLOW_WITHOUT_ZLIB), fix=("Pillow", "zlib", "decoder zip"), heldout=True),
]

FAULTS = [*MODEL, *DATA, *CONFIG, *ENVIRONMENT]
