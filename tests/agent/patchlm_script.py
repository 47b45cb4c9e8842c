"""A correct migration of the custom-code fixture ``patchlm`` into the stand-in, written as the tool calls a good
LLM would make (read first, then write/edit, then check), one list of scripted assistant turns per phase.

Design choice (model): PatchLM loads with ``AutoConfig(trust_remote_code=True)``, so ModelHub takes its transformers
path; the plugin vendors the remote code (``upstream/``, imports made absolute) and registers a thin subclass whose
forward takes ``labels`` and every collated key (``**kwargs``) and returns ``CausalLMOutput`` with ``.loss`` from
``self.loss_function`` (shifted CE, -100 ignored; the trainer swaps in its own with ``loss_type: default``). This keeps
``from_pretrained`` (the checkpoint's weights) and HF's ``init_weights`` for meta init — the custom BaseModel path
would have to re-implement both. The upstream block gets ``**kwargs`` because recompute passes ``past_key_values``.

Data (branch B): template ``patchlm`` from the source chat template, an mm_plugin that expands ``<image>`` into
``<|image|>`` x (H/p)(W/p) and cuts the processed pixels into ``image_patches`` exactly like
``PatchLMForCausalLM.patchify``; the generic collator fits (the forward takes ``**kwargs``), as the plan says.
The source ships a tokenizer and an image processor but no processor class, and the framework's ``load_tokenizer``
keeps only an AutoProcessor with an ``image_processor`` (else image samples fail "Processor was not found"), so the
data phase also writes ``examples/patchlm/processor/`` (a two-line remote-code ProcessorMixin + copies of the
tokenizer/preprocessor files) and the YAML whose data section points there — G2 reads the delivered YAML.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PLUGIN_DIR = "mindspeed_mm/fsdp/models/patchlm"
TEMPLATE_FILE = "mindspeed_mm/fsdp/data/data_utils/func_utils/template.py"
MM_PLUGIN_FILE = "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py"
CONFIG_PATH = "examples/patchlm/patchlm_config.yaml"
SCRIPT_PATH = "examples/patchlm/finetune_patchlm.sh"
PLUGINS = [PLUGIN_DIR, "mindspeed_mm/fsdp/data/datasets/huggingface"]

REGISTERED_CLASS = '''"""PatchLM on the MindSpeed-MM plugin-style FSDP2 route (transformers path of ModelHub, trust_remote_code).

The remote code is vendored in ``upstream/`` (imports made absolute; decoder blocks take ``**kwargs`` so recompute
can pass ``past_key_values``). Upstream ``forward(input_ids, attention_mask, image_patches)`` returns a plain dict
of logits with no loss; the trainer calls ``model(**batch, use_cache=False)`` and reads ``output.loss``, so this
subclass accepts labels and every collated key, and returns an output object with the shifted cross entropy.
"""
from transformers.modeling_outputs import CausalLMOutput

from mindspeed_mm.fsdp.models.patchlm.upstream.modeling_patchlm import PatchLMForCausalLM as _UpstreamPatchLM
from mindspeed_mm.fsdp.utils.register import model_register


@model_register.register("patchlm")
class PatchLMForCausalLM(_UpstreamPatchLM):
    # The framework normalises the loss itself (features.loss_cfg); HF's loss-kwargs path stays off.
    accepts_loss_kwargs = False
    # Upstream attention already is torch's scaled_dot_product_attention, so `attn_implementation: sdpa` is true.
    _supports_sdpa = True

    def forward(self, input_ids, attention_mask=None, image_patches=None, labels=None, **kwargs):
        # kwargs: what the generic collator adds beyond the model's inputs (mm_token_type_ids) and use_cache
        out = super().forward(input_ids=input_ids, attention_mask=attention_mask, image_patches=image_patches)
        logits = out["logits"]
        loss = None
        if labels is not None:
            # unshifted labels; the loss function shifts and ignores -100 (prompt, padding)
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size)
        return CausalLMOutput(loss=loss, logits=logits)
'''

MM_PLUGIN_CLASS = '''class PatchLMPlugin(BasePlugin):
    """PatchLM (Fuyu-style remote code): each <image> becomes image_token x (H/p)*(W/p), one token per raw pixel
    patch, and the model takes the patches themselves as ``image_patches`` (B, patches, C*p*p), cut row-major over
    the patch grid as ``PatchLMForCausalLM.patchify`` does. p = 7 (config.json patch_size)."""
    patch_size = 7

    def _pixel_values(self, images, processor):
        return self._get_mm_inputs(images, [], [], processor)["pixel_values"]

    def process_messages(self, messages, images, videos, audios, processor):
        self._validate_input(processor, images, videos, audios)
        self._validate_messages(messages, images, videos, audios)
        if not images:
            return [dict(m) for m in messages]
        pixels = self._pixel_values(images, processor)
        per_image = (pixels.shape[-2] // self.patch_size) * (pixels.shape[-1] // self.patch_size)
        expanded = self.image_token * per_image
        return [{**m, "content": m["content"].replace(IMAGE_PLACEHOLDER, expanded)} for m in messages]

    def get_mm_inputs(self, images, videos, audios, imglens, vidlens, audlens, batch_ids, processor):
        self._validate_input(processor, images, videos, audios)
        if not images:
            return {}
        pixels = self._pixel_values(images, processor)
        b, c, p = pixels.shape[0], pixels.shape[1], self.patch_size
        patches = pixels.unfold(2, p, p).unfold(3, p, p)
        return {"image_patches": patches.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)}


'''

TEMPLATE_CALL = '''
_register_template(
    name="patchlm",
    params=RegisterParams(
        format_user=StringFormatter(slots=["<|user|>{{content}}<|end|>\\n<|assistant|>"]),
        format_assistant=StringFormatter(slots=["{{content}}<|end|>\\n"]),
        format_system=StringFormatter(slots=["<|system|>{{content}}<|end|>\\n"]),
        stop_words=["<|end|>"],
        efficient_eos=False,
        replace_eos=False),
    mm_plugin=get_mm_plugin(name="patchlm", image_token="<|image|>"),
)
'''

PROCESSOR_DIR = "examples/patchlm/processor"
PROCESSOR_CODE = '''"""PatchLM's processor: its tokenizer + its image processor, which the remote code ships without a processor
class. The framework's load_tokenizer keeps only an AutoProcessor that has an image_processor, so the data
pipeline loads this folder (preprocess_parameters.model_name_or_path, trust_remote_code)."""
from transformers.processing_utils import ProcessorMixin


class PatchLMProcessor(ProcessorMixin):
    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        super().__init__(image_processor, tokenizer, chat_template=chat_template)
'''
PROCESSOR_CONFIG = json.dumps({"processor_class": "PatchLMProcessor",
                               "auto_map": {"AutoProcessor": "processing_patchlm.PatchLMProcessor"}}, indent=2) + "\n"
COPIED_FROM_SOURCE = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "preprocessor_config.json")

LAST_TEMPLATE = '''_register_template(
    name="empty",
    params=RegisterParams(format_assistant=StringFormatter(slots=["{{content}}"])),
)
'''


def processor_files(source: Path) -> dict[str, str]:
    files = {f"{PROCESSOR_DIR}/{name}": (source / name).read_text() for name in COPIED_FROM_SOURCE}
    return {**files, f"{PROCESSOR_DIR}/processing_patchlm.py": PROCESSOR_CODE,
            f"{PROCESSOR_DIR}/processor_config.json": PROCESSOR_CONFIG}


def config_yaml(source: Path, data: Path) -> str:
    return f"""# PatchLM (custom remote code) on the plugin-style FSDP2 route; mirrors examples/qwen3vl.
parallel:
  tensor_parallel_size: 1
  fully_shard_parallel_size: auto
  fsdp_plan:
    apply_modules:
      - layers.{{*}}
    param_dtype: fp32
    reduce_dtype: fp32

data:
  dataset_param:
    dataset_type: huggingface
    attr:
      images: images
      messages: messages
      role_tag: role
      content_tag: content
      user_tag: user
      assistant_tag: assistant
    preprocess_parameters:
      model_name_or_path: {PROCESSOR_DIR}
      trust_remote_code: true
    basic_parameters:
      cutoff_len: 256
      template: patchlm
      train_on_prompt: false
      mask_history: false
      dataset_dir: {data.parent}
      dataset: {data}
  dataloader_param:
    pin_memory: false
    shuffle: true
    dataloader_mode: sampler
    drop_last: true
    sampler_type: BaseRandomBatchSampler
    num_workers: 0
    collate_param:
      collator_id: qwen3vl
      ignore_pad_token_for_loss: true

model:
  model_id: patchlm
  model_name_or_path: {source}
  trust_remote_code: true
  attn_implementation: sdpa
  freeze: []

features:
  loss_cfg:
    loss_type: default
  recompute: true
  recompute_plan:
    apply_modules:
      - layers.{{*}}

training:
  micro_batch_size: 1
  gradient_accumulation_steps: 1
  seed: 42
  lr: 1.0e-4
  lr_decay_style: constant
  weight_decay: 0
  train_iters: 6
  clip_grad: 1.0
  init_model_with_meta_device: false
  optimizer: adamw
  adam_fused: false
  save_interval: 10000
  plugin:
    - {PLUGINS[0]}
    - {PLUGINS[1]}
"""


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "arguments": args}


def finish(summary: str, delivered: list[str], decisions_changed: tuple[str, ...] = ()) -> dict[str, Any]:
    """The hand-off turn: finish_phase alone; the phase gate runs right after it."""
    return {"tool_calls": [call("finish_phase", summary=summary, delivered=delivered,
                                decisions_changed=list(decisions_changed))]}


def build_script(source: Path, target: Path, data: Path) -> dict[str, list[dict[str, Any]]]:
    """phase -> scripted assistant turns. A turn is {"tool_calls": [...]} or {"content": "..."} (phase done);
    ``malformed`` on a turn makes the server first send its first call with broken JSON arguments."""
    model_files = {f"{PLUGIN_DIR}/__init__.py": '"""Model plugin patchlm: imported through training.plugin."""\n',
                   f"{PLUGIN_DIR}/modeling_patchlm.py": REGISTERED_CLASS}
    launch = (target / "examples/qwen3vl/finetune_qwen3vl.sh").read_text().replace(
        "examples/qwen3vl/qwen3vl_config.yaml", CONFIG_PATH)
    return {
        "model": [
            {"content": "Read the remote code first.",
             "tool_calls": [call("read_file", where="source", path="modeling_patchlm.py"),
                            call("read_file", where="source", path="configuration_patchlm.py")]},
            {"content": "Vendor the remote code and register a subclass with labels/**kwargs and a .loss output.",
             "malformed": True,
             "tool_calls": [call("write_file", path=p, content=c, reason="patchlm model plugin")
                            for p, c in model_files.items()]
                           + [call("vendor_remote_code", plugin_dir=PLUGIN_DIR,
                                   files=["configuration_patchlm.py", "modeling_patchlm.py"]),
                              call("edit_file", path=f"{PLUGIN_DIR}/upstream/modeling_patchlm.py",
                                   old_text="def forward(self, x, attn_mask):",
                                   new_text="def forward(self, x, attn_mask, **kwargs):",
                                   reason="blocks take **kwargs (recompute passes past_key_values)")]},
            # one self-check per phase, the one its gate leans on (each probe costs seconds of CPU)
            {"tool_calls": [call("check_forward", model_id="patchlm", plugins=[PLUGIN_DIR], trust_remote_code=True)]},
            finish("The forward returns a finite loss through the registered class (transformers path, vendored "
                   "remote code).", ["model_id patchlm", PLUGIN_DIR]),
        ],
        "data": [
            {"tool_calls": [call("read_file", where="target", path=MM_PLUGIN_FILE),
                            call("read_file", where="target", path=TEMPLATE_FILE),
                            call("read_file", where="source", path="preprocessor_config.json")]},
            {"content": "Branch B: mm_plugin + template (additive), a processor folder (the source has no processor "
                        "class, so load_tokenizer would return none), and the YAML the data gate will read.",
             "tool_calls": [
                 call("edit_file", path=MM_PLUGIN_FILE, old_text="\n\nPLUGINS = {\n",
                      new_text="\n\n" + MM_PLUGIN_CLASS + "PLUGINS = {\n", reason="mm_plugin patchlm class"),
                 call("edit_file", path=MM_PLUGIN_FILE, old_text='    "glm4.1v": GLM4VPlugin,\n}',
                      new_text='    "glm4.1v": GLM4VPlugin,\n    "patchlm": PatchLMPlugin,\n}',
                      reason="register mm_plugin patchlm"),
                 call("edit_file", path=TEMPLATE_FILE, old_text=LAST_TEMPLATE, new_text=LAST_TEMPLATE + TEMPLATE_CALL,
                      reason="template patchlm from the source chat template"),
                 *[call("write_file", path=p, content=c, reason="patchlm processor folder")
                   for p, c in processor_files(source).items()],
                 call("write_file", path=CONFIG_PATH, content=config_yaml(source, data), reason="patchlm config")]},
            {"tool_calls": [call("check_data", config_path=CONFIG_PATH)]},
            finish("Real samples map, expand and collate into input_ids/labels/image_patches.",
                   ["template patchlm", "mm_plugin patchlm", PROCESSOR_DIR, CONFIG_PATH]),
        ],
        "config": [
            {"tool_calls": [call("read_file", where="target", path="examples/qwen3vl/finetune_qwen3vl.sh")]},
            {"tool_calls": [call("write_file", path=SCRIPT_PATH, content=launch,
                                 reason="launch script mirroring qwen3vl")]},
            {"tool_calls": [call("check_config", config_path=CONFIG_PATH, model_id="patchlm", plugins=PLUGINS,
                                 trust_remote_code=True)]},
            finish("Config and launch script written and checked.", [CONFIG_PATH, SCRIPT_PATH]),
        ],
    }


def script_json(script: dict[str, list[dict[str, Any]]]) -> str:
    return json.dumps(script, indent=1)
