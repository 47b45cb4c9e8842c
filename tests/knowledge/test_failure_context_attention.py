"""A config-owned attention message whose premise the run's own facts contradict: the YAML already holds the case's
fix (so the request came from the plugin frame the failure passes through), or the plugin's class itself sets the
flag transformers refuses the implementation by. Both decide model; without those facts the config case stands."""

from __future__ import annotations

from msmigrate.knowledge.classifier import classify
from msmigrate.knowledge.failure_context import (Artifacts, attention_flag_owner, fix_in_place_owner, yaml_keys,
                                                 yaml_values)

PLUGIN = "mindspeed_mm/fsdp/models/qwen2_vl"
YAML = {"model": {"model_id": "qwen2_vl", "attn_implementation": "sdpa"}}


def artifacts(yaml: dict) -> Artifacts:
    return Artifacts(model=(PLUGIN,), data=("mindspeed_mm/fsdp/data/datasets/huggingface",),
                     config=("examples/qwen2_vl/qwen2_vl_config.yaml", "examples/qwen2_vl/finetune_qwen2_vl.sh"),
                     records=("/data/src/data",), yaml_keys=yaml_keys(yaml), yaml_values=yaml_values(yaml))


# G1's meta-build probe, as the gate wrote it (the probe ran with the YAML's sdpa)
FLASH = ("plugin does not build on meta: ImportError: FlashAttention2 has been toggled on, but it cannot be used due to "
         "the following error: the package for FlashAttention2 doesn't seem to be installed. (raised in /venv/lib/"
         "python3.11/site-packages/transformers/modeling_utils.py:1558 in _flash_attn_import_error; called from "
         f"{PLUGIN}/modeling_qwen2_vl.py:54 in __init__: `super().__init__(config, *args, **kwargs)`)")


def test_a_config_case_whose_yaml_fix_is_already_set_goes_to_the_frame_that_asked():
    verdict = classify(FLASH)
    assert (verdict.case_id, verdict.owner) == ("flash-attn-unavailable", "config")
    decided = fix_in_place_owner(verdict.autofix, FLASH, artifacts(YAML))
    assert decided is not None and (decided.owner, decided.rule) == ("model", "fix-in-place")
    assert f"{PLUGIN}/modeling_qwen2_vl.py:54" in decided.reason


def test_the_case_stands_when_the_yaml_asks_for_what_failed_or_no_run_frame_asked():
    verdict = classify(FLASH)
    asks = {"model": {"model_id": "qwen2_vl", "attn_implementation": "flash_attention_2"}}
    assert fix_in_place_owner(verdict.autofix, FLASH, artifacts(asks)) is None
    no_frame = FLASH.split(" called from ")[0]
    assert fix_in_place_owner(verdict.autofix, no_frame, artifacts(YAML)) is None


# G3's attention check, as the gate wrote it: the support read from the built plugin class
G3 = ("[attn-unsupported] model.attn_implementation: attn_implementation 'sdpa' is not supported by the source's model: "
      "Qwen2VLForConditionalGeneration declare no sdpa support (read from the built class mindspeed_mm.fsdp.models."
      "qwen2_vl.modeling_qwen2_vl.Qwen2VLForConditionalGeneration); transformers refuses it when the model is built; "
      "the source supports eager, flash_attention_2")
CLASS = ("from transformers import Qwen2VLForConditionalGeneration as Base\n\n\n"
         "class Qwen2VLForConditionalGeneration(Base):\n    _supports_sdpa = False\n\n    def forward(self, **kw):\n"
         "        return super().forward(**kw)\n")


def test_a_refused_implementation_whose_flag_the_plugin_class_sets_is_the_plugins(tmp_path):
    verdict = classify("", ["attn-unsupported"], gate_verdict=[G3])
    assert verdict.owner == "config"  # what the finding code alone says
    path = tmp_path / "modeling_qwen2_vl.py"
    path.write_text(CLASS)
    decided = attention_flag_owner(G3, {"Qwen2VLForConditionalGeneration": path})
    assert decided is not None and (decided.owner, decided.rule) == ("model", "attention-flag")
    assert f"{path}:5" in decided.reason and "_supports_sdpa = False" in decided.reason
    # transformers' own refusal at build time names the class the same way
    said = ("ValueError: Qwen2VLForConditionalGeneration does not support an attention implementation through "
            "torch.nn.functional.scaled_dot_product_attention yet.")
    assert attention_flag_owner(said, {"Qwen2VLForConditionalGeneration": path}).owner == "model"


def test_an_inherited_flag_or_another_implementation_leaves_the_config_case(tmp_path):
    path = tmp_path / "modeling_qwen2_vl.py"
    path.write_text(CLASS.replace("    _supports_sdpa = False\n", "    _no_split_modules = []\n"))
    assert attention_flag_owner(G3, {"Qwen2VLForConditionalGeneration": path}) is None  # inherited: config's
    path.write_text(CLASS)
    flash = G3.replace("'sdpa'", "'flash_attention_2'").replace("no sdpa support", "no flash_attention_2 support")
    assert attention_flag_owner(flash, {"Qwen2VLForConditionalGeneration": path}) is None
    assert attention_flag_owner(G3, {"OtherClass": path}) is None  # a class the plugin does not define
