"""The fourth held-out group (``h4-``): faults written blind by someone who never read the classifier, the failure
catalog, the owner rules, the routing code or any routing result, and never ran the classifier or the routing bench
on them. They were written from the green qwen2_vl stand-in migration's delivered files (plugin, YAML, launch script),
the target's data path (template, mm_plugin, collator, dataset conversion) and the earlier groups' fault lists (read
only to leave out what they already cover), from how public VLM fine-tuning reports go wrong: the multimodal rope's
sections listed in another order, vision features taken from the penultimate block, the projector's activation
swapped for the LM's, the final norm removed as a 'duplicate', ignored labels clamped onto a real token id, the vision
tower cast to bf16 by an inference habit, the merge size set to one, attention dropout from a pretraining config; a
template that opens every sample with its begin token twice, images normalised with ImageNet's mean and std or fed
BGR, a token count that forgets to square the merge size, labels rebuilt from the input ids (the prompt and the image
trained), the pad id looked up as the image pad token, records whose images are swapped between samples or whose
image marker follows the question; a warm-up as long as the run, a starting learning rate above the peak, gradient
clipping off, weight decay on every parameter, the seed unset, an AdamW epsilon that lost its exponent, the records'
image column named as another dataset's; a launch line whose distributed arguments are quoted into one word,
a launch script that changes into its own folder; a warnings filter that makes every warning an error, PyYAML gone
from the runtime, a host where localhost does not resolve, a site customisation that makes float64 torch's default
dtype, a gloo transport variable exported for another platform.

Some fail loudly, some only change numbers; several surface in another phase's gate than the owner's (a YAML
attribute name that shows in the data path, a data-path pad id that shows as a media mismatch in the model, a warnings
filter that breaks whichever phase first warns). Like the earlier held-out groups, their figures are reported apart
(``--group heldout4``) and a miss is recorded, never fixed by editing the fault or by a rule keyed on its text.

``repair`` marks the faults whose fix lies in the run's own artifacts (the plugin, the data path's mm_plugin /
template / collator, the YAML, the launch script); the records, the runtime and the host are not the run's to
rewrite."""

from __future__ import annotations

from msmigrate.testbeds.faults.heldout3 import _in_init, _wrapping_forward
from msmigrate.testbeds.faults.injection import Fault, Replace, Runtime, SetLine, after_import

_MODELING = ("{modeling}", "{plugin}")
_COLLATOR = ("func_utils/collator.py", "collator.py")
# the green plugin's __init__ calls its parent first: lines put before it change the config the model is built from
_SUPER_INIT_CALL = "        super().__init__(config, *args, **kwargs)\n"
_TEXT_CONFIG = ("        text = config.get_text_config(decoder=True) if hasattr(config, \"get_text_config\") "
                "else config\n")
_QWEN2VL_PARAMS = 'name="qwen2vl",\n    params=RegisterParams(\n'
_EXPANSION_MERGE = 'merge = getattr(processor.image_processor, "merge_size") ** 2'
_COLLATE_TENSORS = "batch = {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}"
_PROMPTS = ("Describe the image.", "What colour is the shape?", "What shape is in the picture?")


def _before_init(lines: str) -> Replace:
    """Statements the plugin's __init__ runs on the config before its parent builds the model."""
    return Replace("{modeling}", _SUPER_INIT_CALL, lines + _SUPER_INIT_CALL)


def _swap_images(first: str, second: str) -> tuple[Replace, ...]:
    """The records' image paths of two samples exchanged (each path occurs once in the records)."""
    return (Replace("{data}", f'"{first}"', '"@swap@"'), Replace("{data}", f'"{second}"', f'"{first}"'),
            Replace("{data}", '"@swap@"', f'"{second}"'))


# PyYAML removed by `pip uninstall` of a tool that listed it as its own (``None`` in sys.modules: not importable)
_PYYAML_GONE = '''import sys
sys.modules["yaml"] = None
'''

# A container image whose /etc/hosts has no localhost line: c10d cannot resolve the rendezvous host (the C++ store
# resolves it itself, so the store constructor is where the condition shows; Python's resolver is refused too)
_LOCALHOST_UNRESOLVED = after_import("torch.distributed", '''def _patch(module):
    import socket
    real_getaddrinfo = socket.getaddrinfo
    def getaddrinfo(host, *args, **kwargs):
        if host in ("localhost", b"localhost"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real_getaddrinfo(host, *args, **kwargs)
    socket.getaddrinfo = getaddrinfo
    real_store = module.TCPStore
    error = getattr(module, "DistNetworkError", RuntimeError)
    def TCPStore(host_name, *args, **kwargs):
        if host_name == "localhost":
            port = args[0] if args else kwargs.get("port")
            raise error(f"The client socket has failed to connect to any network address of (localhost, {port}). "
                        f"The IPv4 network addresses of (localhost, {port}) cannot be retrieved (gai error: -2 - "
                        "Name or service not known).")
        return real_store(host_name, *args, **kwargs)
    module.TCPStore = TCPStore
    rendezvous = sys.modules.get("torch.distributed.rendezvous")
    if getattr(rendezvous, "TCPStore", None) is real_store:  # bound while torch.distributed was being imported
        rendezvous.TCPStore = TCPStore
''')

# A lab-wide site customisation for scientific code sets torch's default dtype to float64 in every interpreter
_FLOAT64_DEFAULT = '''import torch
torch.set_default_dtype(torch.float64)
'''

MODEL = [
    Fault("h4-model-mrope-sections-reversed", "model", "plugin",
          "the plugin's __init__ reorders the rotary embedding's mrope_section as (w, h, t), read off a figure "
          "instead of the config: the rotary frequencies of time, height and width go to the wrong position axes",
          (_in_init("        rotary = self.model.language_model.rotary_emb\n"
                    "        rotary.mrope_section = list(reversed(rotary.mrope_section))\n"),),
          fix=(*_MODELING, "mrope_section"), repair=True, heldout=True),
    Fault("h4-model-vision-last-block-dropped", "model", "plugin",
          "LLaVA's vision_feature_layer: -2 carried over by cutting the vision tower's last block: the features "
          "come from the penultimate block and the checkpoint's last block is loaded nowhere",
          (_in_init("        self.model.visual.blocks = self.model.visual.blocks[:-1]\n"),),
          fix=(*_MODELING, "visual.blocks", "vision_feature_layer"), repair=True, heldout=True),
    Fault("h4-model-merger-activation-silu", "model", "plugin",
          "the vision merger's GELU replaced by SiLU, 'to match the language model's activation': the projector "
          "computes another function of the same weights",
          (_in_init("        import torch\n        self.model.visual.merger.mlp[1] = torch.nn.SiLU()\n"),),
          fix=(*_MODELING, "merger", "GELU"), repair=True, heldout=True),
    Fault("h4-model-final-norm-removed", "model", "plugin",
          "the language model's final norm replaced by Identity because the source's custom head normalised its "
          "input itself: here the head gets un-normalised hidden states",
          (_in_init("        import torch\n        self.model.language_model.norm = torch.nn.Identity()\n"),),
          fix=(*_MODELING, "norm"), repair=True, heldout=True),
    Fault("h4-model-labels-clamped", "model", "plugin",
          "forward clamps the labels at 0 ('a kernel rejected negative targets'): every ignored position is trained "
          "to predict token 0, prompt and image tokens included",
          (_wrapping_forward(before="        if kwargs.get(\"labels\") is not None:\n"
                                    "            kwargs[\"labels\"] = kwargs[\"labels\"].clamp(min=0)\n"),),
          fix=(*_MODELING, "labels", "-100"), repair=True, heldout=True),
    Fault("h4-model-vision-tower-bf16", "model", "plugin",
          "the plugin's __init__ casts the vision tower to bfloat16, a memory habit from an inference script, "
          "while the YAML's mixed precision keeps everything in fp32",
          (_in_init("        import torch\n        self.model.visual.to(torch.bfloat16)\n"),),
          fix=(*_MODELING, "bfloat16", "param_dtype"), repair=True, heldout=True),
    Fault("h4-model-spatial-merge-one", "model", "plugin",
          "the plugin sets the vision config's spatial_merge_size to 1, from a source whose processor merged "
          "patches itself: the merger's shapes and the image token count no longer match the checkpoint's",
          (_before_init("        config.vision_config.spatial_merge_size = 1\n"),),
          fix=(*_MODELING, "spatial_merge_size"), repair=True, heldout=True),
    Fault("h4-model-attention-dropout", "model", "plugin",
          "the plugin sets attention_dropout 0.1 from the pretraining config of the source: fine-tuning runs with "
          "dropout the checkpoint never had in fine-tuning, and the loss is no longer reproducible",
          (_before_init(_TEXT_CONFIG + "        text.attention_dropout = 0.1\n"),),
          fix=(*_MODELING, "attention_dropout"), repair=True, heldout=True),
]

DATA = [
    Fault("h4-data-template-double-begin", "data", "template",
          "a format_prefix of <|im_start|> added to the qwen2vl template (the Llama habit of a begin token before "
          "everything) while its system slot opens with it too: every sample starts <|im_start|><|im_start|>",
          (Replace("{template}", _QWEN2VL_PARAMS,
                   _QWEN2VL_PARAMS + '        format_prefix=EmptyFormatter(slots=["<|im_start|>"]),\n'),),
          fix=("template.py", "format_prefix"), repair=True, heldout=True),
    Fault("h4-data-mm-plugin-imagenet-mean-std", "data", "mm_plugin",
          "the mm_plugin passes ImageNet's mean and std to the image processor (a ResNet-era default): the pixels "
          "are normalised with other statistics than the vision tower was trained on",
          (Replace("{mm_plugin}", 'processor.image_processor(images, return_tensors="pt")',
                   'processor.image_processor(images, return_tensors="pt", image_mean=[0.485, 0.456, 0.406], '
                   'image_std=[0.229, 0.224, 0.225])'),),
          fix=("mm_plugin.py", "image_mean", "image_std"), repair=True, heldout=True),
    Fault("h4-data-mm-plugin-bgr", "data", "mm_plugin",
          "the mm_plugin reverses the channels to BGR, as the source repository's OpenCV loader delivered them: the "
          "vision tower sees red and blue exchanged",
          (Replace("{mm_plugin}", 'return image if image.mode == "RGB" else image.convert("RGB")',
                   'return Image.merge("RGB", image.convert("RGB").split()[::-1])'),),
          fix=("mm_plugin.py", "_preprocess_image", "RGB"), repair=True, heldout=True),
    Fault("h4-data-mm-plugin-merge-not-squared", "data", "mm_plugin",
          "the image token count divides the patch count by merge_size instead of its square: each image gets twice "
          "as many image tokens as the vision tower returns features (shows in the model's forward)",
          (Replace("{mm_plugin}", _EXPANSION_MERGE, _EXPANSION_MERGE.replace(" ** 2", "")),),
          fix=("mm_plugin.py", "merge_size", "process_messages"), repair=True, heldout=True),
    Fault("h4-data-collator-labels-from-input-ids", "data", "collator",
          "the collator rebuilds the labels from the input ids, the habit of a causal-LM collator: the system "
          "prompt, the question and every image token are trained as answer text",
          (Replace("{collator}", _COLLATE_TENSORS,
                   _COLLATE_TENSORS + "\n        batch[\"labels\"] = torch.where(batch[\"attention_mask\"].bool(), "
                   "batch[\"input_ids\"], self.label_pad_token_id)"),),
          fix=(*_COLLATOR, "labels"), repair=True, heldout=True),
    Fault("h4-data-collator-pad-is-image-pad", "data", "collator",
          "the collator pads input ids with <|image_pad|>, looked up because its name says pad: padded positions "
          "read as image tokens (shows as a media mismatch in the model's forward when a batch is padded)",
          (Replace("{collator}", "pad_id = self.tokenizer.pad_token_id",
                   "pad_id = self.tokenizer.convert_tokens_to_ids(\"<|image_pad|>\")"),),
          fix=(*_COLLATOR, "pad_token_id"), repair=True, heldout=True),
    Fault("h4-data-records-images-swapped", "data", "dataset",
          "the export joined the image column after sorting the conversations: the first two samples carry each "
          "other's image and their answers describe the wrong picture",
          _swap_images("images/sample_00.png", "images/sample_01.png"),
          fix=("train.json", "images"), heldout=True),
    Fault("h4-data-records-image-after-question", "data", "dataset",
          "the export wrote the image marker after the question ('question, then image', another dataset's "
          "convention): the image follows the text it is asked about",
          tuple(Replace("{data}", f'"<image>{p}"', f'"{p}<image>"', count=0) for p in _PROMPTS),
          fix=("train.json", "<image>"), heldout=True),
]

CONFIG = [
    Fault("h4-config-warmup-whole-run", "config", "yaml",
          "lr_warmup_ratio: 0.99 carried over from a recipe that warmed up for its first 2000 of 2020 steps: the "
          "learning rate ramps for the whole run and never reaches its peak",
          (Replace("{config}", "  lr_decay_style: constant\n",
                   "  lr_decay_style: constant\n  lr_warmup_ratio: 0.99\n"),),
          fix=("lr_warmup_ratio",), repair=True, heldout=True),
    Fault("h4-config-lr-start-above-peak", "config", "yaml",
          "lr_start: 1.0e-3 added as 'the starting learning rate' read from another trainer where it meant the "
          "peak: the schedule would start above its peak",
          (Replace("{config}", "  lr: 1.0e-4\n", "  lr: 1.0e-4\n  lr_start: 1.0e-3\n"),),
          fix=("lr_start", "lr"), repair=True, heldout=True),
    Fault("h4-config-clip-grad-off", "config", "yaml",
          "clip_grad: 0 written to mean 'the default clipping': the norm is only computed, so a spike goes "
          "straight into the weights",
          (SetLine("{config}", "clip_grad", "0"),), fix=("clip_grad",), repair=True, heldout=True),
    Fault("h4-config-weight-decay-everywhere", "config", "yaml",
          "weight_decay: 0.1 from a pretraining recipe, on a route with one parameter group: norms, biases and "
          "embeddings are decayed too",
          (SetLine("{config}", "weight_decay", "0.1"),), fix=("weight_decay",), repair=True, heldout=True),
    Fault("h4-config-seed-unset", "config", "yaml",
          "seed: null written to 'draw a fresh seed each run': the trainer's arguments take an integer",
          (SetLine("{config}", "seed", "null"),), fix=("seed",), repair=True, heldout=True),
    Fault("h4-config-adam-eps-exponent-lost", "config", "yaml",
          "adam_eps: 1.0 typed for 1.0e-8 (the exponent lost): every AdamW update is divided by about one, so the "
          "weights barely move",
          (Replace("{config}", "  optimizer: adamw\n", "  optimizer: adamw\n  adam_eps: 1.0\n"),),
          fix=("adam_eps",), repair=True, heldout=True),
    Fault("h4-config-attr-images-singular", "config", "yaml",
          "attr.images set to `image`, the column name of the LLaVA-style dataset the recipe was written for: the "
          "records' image lists are never read, so every <image> marker has no image (shows in the data path)",
          (SetLine("{config}", "images", "image"),), fix=("images", "attr"), repair=True, heldout=True),
    Fault("h4-config-launch-args-quoted", "config", "launch",
          "$DISTRIBUTED_ARGS quoted on the torchrun line to silence a shell linter: torchrun gets the whole "
          "argument block as one word and takes it for the script to run",
          (Replace("{launch}", "torchrun $DISTRIBUTED_ARGS ", 'torchrun "$DISTRIBUTED_ARGS" '),),
          fix=("{launch}", "DISTRIBUTED_ARGS"), repair=True, heldout=True),
    Fault("h4-config-launch-cd-into-example", "config", "launch",
          "a cd into the script's own folder added so it can be started from anywhere: the trainer and YAML paths, "
          "relative to the repository root, no longer resolve",
          (Replace("{launch}", "mkdir -p logs\n", "cd \"$(dirname \"$0\")\"\nmkdir -p logs\n"),),
          fix=("{launch}", "cd"), repair=True, heldout=True),
]

ENVIRONMENT = [
    Fault("h4-env-pythonwarnings-error", "environment", "runtime",
          "a CI profile exports PYTHONWARNINGS=error: the first deprecation or user warning any library emits is "
          "raised as an exception",
          runtime=Runtime(env={"PYTHONWARNINGS": "error"}), fix=("PYTHONWARNINGS", "warning"), heldout=True),
    Fault("h4-env-pyyaml-uninstalled", "environment", "runtime",
          "`pip uninstall` of a tool that listed PyYAML as its own removed it from the runtime: the trainer cannot "
          "read its YAML",
          runtime=Runtime(sitecustomize=_PYYAML_GONE), fix=("yaml", "PyYAML", "pyyaml"), heldout=True),
    Fault("h4-env-localhost-unresolved", "environment", "host",
          "the container image's /etc/hosts has no localhost line: the rendezvous host of the launch script does "
          "not resolve",
          runtime=Runtime(sitecustomize=_LOCALHOST_UNRESOLVED), fix=("localhost", "/etc/hosts", "MASTER_ADDR"),
          heldout=True),
    Fault("h4-env-default-dtype-float64", "environment", "runtime",
          "a lab-wide site customisation for scientific code sets torch's default dtype to float64 in every "
          "interpreter: the model is built in double precision, the data path's tensors stay float32",
          runtime=Runtime(sitecustomize=_FLOAT64_DEFAULT), fix=("float64", "set_default_dtype", "sitecustomize"),
          heldout=True),
    Fault("h4-env-gloo-transport-uv", "environment", "runtime",
          "synced dotfiles export GLOO_DEVICE_TRANSPORT=UV, set for a macOS laptop: this host's gloo has no such "
          "device and no process group comes up",
          runtime=Runtime(env={"GLOO_DEVICE_TRANSPORT": "UV"}), fix=("GLOO_DEVICE_TRANSPORT", "gloo"), heldout=True),
]

FAULTS = [*MODEL, *DATA, *CONFIG, *ENVIRONMENT]
