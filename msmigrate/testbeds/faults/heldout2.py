"""The second held-out group (``h2-``): faults written blind by someone who never read the classifier, the failure
catalog, the owner rules or the routing results, from how a VLM port to MindSpeed-MM goes wrong: the plugin's rope,
norm, mask, positions and vision-patch layout; the chat template's system and role turns, the mm_plugin's media
markers and image handling, the collator's labels and media keys, the records' format; the YAML's schedule, freeze
list, sharding size, data switches and sampler, the launch script's port and environment; the runtime's
packages and the host's ports, memory and scheduler. Some fail loudly, some only change numbers; some surface in
another phase's gate than the owner's. Like ``heldout``, their figures are reported apart and a miss is recorded,
never fixed by editing the fault or by a rule keyed on its text.

``repair`` marks the faults whose fix lies in the run's own artifacts (the plugin, the data path's mm_plugin /
template / collator, the YAML, the launch script); the records and the host are the user's."""

from __future__ import annotations

from msmigrate.testbeds.faults.injection import Fault, Replace, Runtime, SetLine
from msmigrate.testbeds.faults.injection import after_import as _after_import
from msmigrate.testbeds.faults.model import CLASS_HEAD

_MODELING = ("{modeling}", "{plugin}")
# The green plugin's own __init__ (the rules policy states the embedding tie there): config edits go before it
_SUPER_INIT = "        super().__init__(config, *args, **kwargs)\n"
_COLLATE_TENSORS = "batch = {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}"
_COLLATOR = ("func_utils/collator.py", "collator.py")
_QWEN2VL_USER = ('name="qwen2vl",\n    params=RegisterParams(\n        format_user=StringFormatter('
                 'slots=["<|im_start|>user\\n{{content}}<|im_end|>\\n<|im_start|>assistant\\n"])')


def _method(body: str) -> Replace:
    return Replace("{modeling}", CLASS_HEAD, CLASS_HEAD + body)


def _forward(lines: str) -> Replace:
    """A forward override: ``lines`` rewrite ``kwargs`` (torch imported), then the upstream forward runs."""
    return _method("    def forward(self, *args, **kwargs):\n        import torch  # noqa: F401\n\n" + lines +
                   "        return super().forward(*args, **kwargs)\n\n")


def _before_init(lines: str) -> Replace:
    return Replace("{modeling}", _SUPER_INIT, lines + _SUPER_INIT)


def _after_init(lines: str) -> Replace:
    return Replace("{modeling}", _SUPER_INIT, _SUPER_INIT + lines)


# The text config's rope settings on either transformers line: 5.x keeps them in ``rope_parameters``, 4.x in
# ``rope_theta`` / ``rope_scaling``
_TEXT_CONFIG = ("        text = config.get_text_config(decoder=True) if hasattr(config, \"get_text_config\") "
                "else config\n")

# Another job on the host holds the rendezvous port: the rank that listens fails as c10d reports it
_PORT_IN_USE = _after_import("torch.distributed.distributed_c10d", '''def _patch(module):
    if os.environ.get("RANK") is None:
        return
    error = getattr(module, "DistNetworkError", RuntimeError)
    def init_process_group(*args, **kwargs):
        port = os.environ.get("MASTER_PORT", "29500")
        raise error(f"The server socket has failed to listen on any local network address. port: {port}, "
                    "useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use")
    module.init_process_group = init_process_group
''')

# A torch wheel built without gloo (a vendor build for one accelerator installed on this host)
_NO_GLOO = _after_import("torch.distributed.distributed_c10d", '''def _patch(module):
    real = module.init_process_group
    def init_process_group(backend=None, *args, **kwargs):
        if backend is None or "gloo" in str(backend):
            raise RuntimeError("Distributed package doesn't have Gloo built in")
        return real(backend, *args, **kwargs)
    module.init_process_group = init_process_group
    module.is_gloo_available = lambda: False
''')

# torch before 2.6: FSDP2's fully_shard is not exported from torch.distributed.fsdp yet
_TORCH_BEFORE_FSDP2 = _after_import("torch.distributed.fsdp", '''def _patch(module):
    module.__dict__.pop("fully_shard", None)
    if hasattr(module, "__all__"):
        module.__all__ = [n for n in module.__all__ if n != "fully_shard"]
''')

# The host's memory is held by another job: the CPU allocator refuses the first weight of any model build
_HOST_MEMORY_HELD = _after_import("torch.nn.modules.sparse", '''def _patch(module):
    def __init__(self, *args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you "
                           "tried to allocate 268435456 bytes.")
    module.Embedding.__init__ = __init__
''')

# The cluster scheduler preempts the job: SIGTERM to a rank during its second backward
_PREEMPTED = _after_import("torch._tensor", '''def _patch(module):
    if os.environ.get("RANK") is None:
        return
    import signal
    real = module.Tensor.backward
    calls = [0]
    def backward(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(self, *args, **kwargs)
    module.Tensor.backward = backward
''')

# An interrupted pip uninstall left accelerate's metadata but not its package: nothing finds it (``None`` in
# sys.modules is how Python marks a module that must not be imported; find_spec answers None for it)
_NO_ACCELERATE = """import sys
sys.modules["accelerate"] = None
"""

MODEL = [
    Fault("h2-model-rope-theta-override", "model", "plugin",
          "the plugin's __init__ sets rope_theta to 1e6, copied from a larger sibling's config, while this "
          "checkpoint was trained with its own theta: every rotary position is off",
          (_before_init(_TEXT_CONFIG +
                        "        rope = getattr(text, \"rope_parameters\", None)\n"
                        "        if isinstance(rope, dict):\n"
                        "            rope[\"rope_theta\"] = 1000000.0\n"
                        "        else:\n"
                        "            text.rope_theta = 1000000.0\n"),),
          fix=(*_MODELING, "rope_theta"), repair=True, heldout=True),
    Fault("h2-model-rms-norm-eps", "model", "plugin",
          "the plugin's __init__ overrides rms_norm_eps with 1e-2 (a 'stability' tweak from a forum post): every "
          "normalised activation shifts",
          (_before_init(_TEXT_CONFIG + "        text.rms_norm_eps = 1e-2\n"),),
          fix=(*_MODELING, "rms_norm_eps"), repair=True, heldout=True),
    Fault("h2-model-image-token-id-shifted", "model", "plugin",
          "the plugin adds one to image_token_id after a tokenizer resize in another branch of the port: the "
          "model looks for its image tokens under the next id",
          (_after_init("        config.image_token_id = config.image_token_id + 1\n"),),
          fix=(*_MODELING, "image_token_id"), repair=True, heldout=True),
    Fault("h2-model-attention-mask-inverted", "model", "plugin",
          "forward converts the attention mask to the 'True means masked' convention of another attention kernel: "
          "real tokens are masked and padding is attended",
          (_forward("        if kwargs.get(\"attention_mask\") is not None:\n"
                    "            kwargs[\"attention_mask\"] = 1 - kwargs[\"attention_mask\"]\n"),),
          fix=(*_MODELING, "attention_mask"), repair=True, heldout=True),
    Fault("h2-model-vision-patch-order", "model", "plugin",
          "forward re-lays each image's patches row-major over (h, w) swapped before the vision merger, while the "
          "processor already orders them in merge windows: the merger pools the wrong neighbours",
          (_forward("        pixels, grid = kwargs.get(\"pixel_values\"), kwargs.get(\"image_grid_thw\")\n"
                    "        if pixels is not None and grid is not None:\n"
                    "            parts, start = [], 0\n"
                    "            for t, h, w in grid.tolist():\n"
                    "                n = t * h * w\n"
                    "                parts.append(pixels[start:start + n].reshape(t, h, w, -1).transpose(1, 2)"
                    ".reshape(n, -1))\n"
                    "                start += n\n"
                    "            kwargs[\"pixel_values\"] = torch.cat(parts)\n"),),
          fix=(*_MODELING, "pixel_values"), repair=True, heldout=True),
    Fault("h2-model-position-ids-flat", "model", "plugin",
          "forward passes plain 1-D position ids (copied from a text-only LLM plugin): the multimodal rope loses "
          "the image's (t, h, w) positions",
          (_forward("        ids = kwargs.get(\"input_ids\")\n"
                    "        if ids is not None:\n"
                    "            kwargs[\"position_ids\"] = torch.arange(ids.shape[1], device=ids.device)"
                    ".unsqueeze(0).expand(ids.shape[0], -1)\n"),),
          fix=(*_MODELING, "position_ids"), repair=True, heldout=True),
    Fault("h2-model-init-signature", "model", "plugin",
          "the __init__ signature copied from the source's custom class, which took the vision config as a second "
          "argument: the framework builds the model with the config alone",
          (Replace("{modeling}", "    def __init__(self, config, *args, **kwargs):\n",
                   "    def __init__(self, config, vision_config, *args, **kwargs):\n"),),
          fix=(*_MODELING, "__init__", "vision_config"), repair=True, heldout=True),
]

DATA = [
    Fault("h2-data-template-drops-system", "data", "template",
          "the qwen2vl template's default system prompt deleted to 'save tokens': the prompts no longer match what "
          "the checkpoint's own chat template builds",
          (Replace("{template}", '        default_system="You are a helpful assistant.",\n', ""),),
          fix=("template.py", "default_system", "format_system"), repair=True, heldout=True),
    Fault("h2-data-template-assistant-marker", "data", "template",
          "the user slot's closing `<|im_start|>assistant` lost its role name in a hand edit: the answer is no "
          "longer introduced as the assistant's turn",
          (Replace("{template}", _QWEN2VL_USER,
                   _QWEN2VL_USER.replace("<|im_start|>assistant\\n", "<|im_start|>\\n")),),
          fix=("template.py", "format_user"), repair=True, heldout=True),
    Fault("h2-data-mm-plugin-vision-markers-swapped", "data", "mm_plugin",
          "the mm_plugin's vision start and end markers swapped (declared in the wrong order): every image is "
          "wrapped end-first",
          (Replace("{mm_plugin}", '    vision_bos_token: str = "<|vision_start|>"\n'
                                  '    vision_eos_token: str = "<|vision_end|>"\n',
                   '    vision_bos_token: str = "<|vision_end|>"\n'
                   '    vision_eos_token: str = "<|vision_start|>"\n'),),
          fix=("mm_plugin.py", "vision_bos_token", "vision_eos_token"), repair=True, heldout=True),
    Fault("h2-data-mm-plugin-fixed-resize", "data", "mm_plugin",
          "the mm_plugin resizes every image to 224x224 before the processor (a habit from CLIP-style encoders): "
          "the image's pixels and token count differ from the checkpoint's own processing",
          (Replace("{mm_plugin}", "out.append(self._preprocess_image(opened.copy(), **kwargs))",
                   "out.append(self._preprocess_image(opened.copy().resize((224, 224)), **kwargs))"),),
          fix=("mm_plugin.py", "_regularize_images"), repair=True, heldout=True),
    Fault("h2-data-collator-shifts-labels", "data", "collator",
          "the collator shifts the labels left by one, as for a model that does not shift them itself: the loss "
          "trains each position on the token two ahead",
          (Replace("{collator}", _COLLATE_TENSORS,
                   _COLLATE_TENSORS + "\n        batch[\"labels\"] = torch.cat([batch[\"labels\"][:, 1:], "
                   "torch.full_like(batch[\"labels\"][:, :1], IGNORE_INDEX)], dim=1)"),),
          fix=(*_COLLATOR, "labels"), repair=True, heldout=True),
    Fault("h2-data-collator-drops-image-grid", "data", "collator",
          "the collator keeps only the media keys of an older model's forward and drops image_grid_thw",
          (Replace("{collator}", "batch[\"input_ids\"].tolist(), self.processor))\n",
                   "batch[\"input_ids\"].tolist(), self.processor))\n        batch.pop(\"image_grid_thw\", None)\n"),),
          fix=(*_COLLATOR, "image_grid_thw"), repair=True, heldout=True),
    Fault("h2-data-records-roles-swapped", "data", "dataset",
          "an export script wrote each conversation with the reply's speaker first: every record opens with the "
          "assistant",
          (Replace("{data}", '"role": "user"', '"role": "@swap@"', count=0),
           Replace("{data}", '"role": "assistant"', '"role": "user"', count=0),
           Replace("{data}", '"role": "@swap@"', '"role": "assistant"', count=0)),
          fix=("train.json", "role"), heldout=True),
    Fault("h2-data-records-concatenated", "data", "dataset",
          "the records written by an export loop that appends one json.dump per sample: a stream of objects, not "
          "the one list the .json file must hold",
          (Replace("{data}", "[\n {", "{", count=1), Replace("{data}", "\n },\n {", "}\n{", count=0),
           Replace("{data}", "\n }\n]", "}\n", count=1)),
          fix=("train.json",), heldout=True),
]

CONFIG = [
    Fault("h2-config-decay-style-unknown", "config", "yaml",
          "lr_decay_style set to cosine_with_restarts, the name of another trainer's schedule",
          (SetLine("{config}", "lr_decay_style", "cosine_with_restarts"),), fix=("lr_decay_style",), repair=True,
          heldout=True),
    Fault("h2-config-lr-exponent-sign", "config", "yaml",
          "lr typed 1.0e+4 instead of 1.0e-4 (the exponent's sign): the first steps blow the weights up",
          (SetLine("{config}", "lr", "1.0e+4"),), fix=("lr", "training.lr"), repair=True, heldout=True),
    Fault("h2-config-freeze-missing-module", "config", "yaml",
          "freeze names model.vision_tower (LLaVA's name for the vision encoder): it matches no module, so "
          "nothing is frozen and the vision encoder trains",
          (SetLine("{config}", "freeze", "[model.vision_tower]"),), fix=("freeze", "model.vision_tower"),
          repair=True, heldout=True),
    Fault("h2-config-fsdp-size-from-8npu-example", "config", "yaml",
          "fully_shard_parallel_size: 8 copied from the 8-device example, on a 2-process launch",
          (SetLine("{config}", "fully_shard_parallel_size", "8"),), fix=("fully_shard_parallel_size",),
          repair=True, heldout=True),
    Fault("h2-config-train-on-prompt", "config", "yaml",
          "train_on_prompt switched on while trying options: the prompt and the image tokens are trained as "
          "answers (shows in the data path's labels)",
          (SetLine("{config}", "train_on_prompt", "true"),), fix=("train_on_prompt",), repair=True, heldout=True),
    Fault("h2-config-dataset-dir-relative", "config", "yaml",
          "dataset_dir left as the example's relative ./data: the records' image paths resolve against the wrong "
          "folder (shows when the data path opens the first image)",
          (SetLine("{config}", "dataset_dir", "./data"),), fix=("dataset_dir",), repair=True, heldout=True),
    Fault("h2-config-drop-last-false", "config", "yaml",
          "drop_last set to false to keep the last partial batch: the batch sampler the YAML names refuses it "
          "(shows when the data path builds its loader)",
          (SetLine("{config}", "drop_last", "false"),), fix=("drop_last",), repair=True, heldout=True),
    Fault("h2-config-template-other-family", "config", "yaml",
          "template set to qwen3_vl_nothink (registered, but the next generation's): no default system turn, so "
          "the prompts differ from the checkpoint's own chat template",
          (SetLine("{config}", "template", "qwen3_vl_nothink"),), fix=("template",), repair=True, heldout=True),
    Fault("h2-config-launch-port-out-of-range", "config", "launch",
          "MASTER_PORT hard-coded with one zero too many (600000)",
          (Replace("{launch}", "MASTER_PORT=${MASTER_PORT:-6000}", "MASTER_PORT=600000"),),
          fix=("{launch}", "MASTER_PORT"), repair=True, heldout=True),
    Fault("h2-config-launch-non-megatron-dropped", "config", "launch",
          "the launch script rebuilt from a Megatron-route example, which does not export NON_MEGATRON",
          (Replace("{launch}", "export NON_MEGATRON=true\n", ""),),
          fix=("{launch}", "NON_MEGATRON"), repair=True, heldout=True),
]

ENVIRONMENT = [
    Fault("h2-env-master-port-in-use", "environment", "host",
          "another job on the host holds the rendezvous port: the listening rank cannot bind it",
          runtime=Runtime(sitecustomize=_PORT_IN_USE), fix=("MASTER_PORT", "address already in use", "port"),
          heldout=True),
    Fault("h2-env-torch-without-gloo", "environment", "runtime",
          "the runtime's torch is a vendor build without gloo (made for one accelerator, installed on this host)",
          runtime=Runtime(sitecustomize=_NO_GLOO), fix=("gloo", "torch"), heldout=True),
    Fault("h2-env-torch-before-fsdp2", "environment", "runtime",
          "the runtime has a torch release older than FSDP2's public fully_shard (pinned by another project)",
          runtime=Runtime(sitecustomize=_TORCH_BEFORE_FSDP2), fix=("torch", "fully_shard"), heldout=True),
    Fault("h2-env-accelerate-missing", "environment", "runtime",
          "an interrupted pip uninstall removed accelerate's package (the model hub imports it) and left its "
          "metadata",
          runtime=Runtime(sitecustomize=_NO_ACCELERATE), fix=("accelerate",), heldout=True),
    Fault("h2-env-host-memory-held", "environment", "host",
          "another job holds the host's memory: the CPU allocator refuses the first weight of any model build "
          "(shows in the model phase's build probe)",
          runtime=Runtime(sitecustomize=_HOST_MEMORY_HELD), fix=("not enough memory", "host memory", "memory"),
          heldout=True),
    Fault("h2-env-preempted-sigterm", "environment", "host",
          "the cluster scheduler preempts the job: a rank gets SIGTERM during its second step",
          runtime=Runtime(sitecustomize=_PREEMPTED), fix=("SIGTERM", "preempt", "-15"), heldout=True),
]

FAULTS = [*MODEL, *DATA, *CONFIG, *ENVIRONMENT]
