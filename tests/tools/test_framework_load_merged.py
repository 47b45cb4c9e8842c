"""G1's framework-load failure names transformers' many-to-one weight conversions (probes/framework_load.py,
``merged_by_transformers``). The sweep's qwen3_5_moe failed G1 with its fused expert tensors unwritten and a cause that
read as a key-mapping slip: transformers 5 saves per-expert ``experts.N.gate_proj.weight`` / ``up_proj.weight`` and
merges them into one ``experts.gate_up_proj`` on load (its conversion mapping's ``WeightConverter``), while the target's
HF loader maps one key to one name, so no renaming can fill them."""

from __future__ import annotations

import pytest
from probe_import import import_probe

MOE_TEXT = dict(hidden_size=32, moe_intermediate_size=16, shared_expert_intermediate_size=16, num_experts=4,
                num_experts_per_tok=2, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                vocab_size=64, layer_types=["full_attention", "full_attention"])


def test_fused_experts_are_named_as_merged_by_transformers():
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "Qwen3_5MoeForConditionalGeneration"):
        pytest.skip("no Qwen3.5-MoE in this transformers")
    from accelerate import init_empty_weights

    cfg = transformers.AutoConfig.for_model("qwen3_5_moe", text_config=MOE_TEXT,
                                            vision_config=dict(depth=1, hidden_size=32, intermediate_size=64,
                                                               num_heads=2, out_hidden_size=32, patch_size=14))
    with init_empty_weights():
        model = transformers.Qwen3_5MoeForConditionalGeneration(cfg)
    unfilled = ["model.language_model.layers.0.mlp.experts.gate_up_proj",
                "model.language_model.layers.0.mlp.experts.down_proj"]
    found = import_probe("framework_load").merged_by_transformers(model, unfilled)
    merged = dict((tgt, src) for src, tgt in found)
    assert set(merged) == {"mlp.experts.gate_up_proj", "mlp.experts.down_proj"} and len(found) == 2, found
    assert merged["mlp.experts.gate_up_proj"] == ["mlp.experts.*.gate_proj.weight", "mlp.experts.*.up_proj.weight"]
    # a name no conversion builds (a plain rename's target, or a slip in the plugin) is not explained that way
    assert import_probe("framework_load").merged_by_transformers(model, ["model.language_model.layers.0.mlp.gate.weight"]) == []


def test_parameters_the_sources_own_class_has_nothing_like_are_the_plugins_modules():
    """A plugin that adds modules (per-head q/k norms copied from a later family) leaves their parameters unwritten
    by any checkpoint of the source: the upstream class built from the same config names no parameter like them,
    while a parameter it has (under another prefix) is a mapping question, not an added module."""
    transformers = pytest.importorskip("transformers")
    import torch

    probe = import_probe("framework_load")
    cfg = transformers.Qwen2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                   num_key_value_heads=1, vocab_size=64)

    class WithQkNorm(transformers.Qwen2ForCausalLM):
        def __init__(self, config):
            super().__init__(config)
            for layer in self.model.layers:
                layer.self_attn.q_norm = torch.nn.LayerNorm(16)

    from accelerate import init_empty_weights

    with init_empty_weights():
        model = WithQkNorm(cfg)
    added = ["model.layers.0.self_attn.q_norm.weight", "model.layers.1.self_attn.q_norm.bias"]
    assert probe.not_in_source_class(model, added) == (added, "Qwen2ForCausalLM")
    moved = ["model.layers.1.self_attn.q_proj.weight"]  # the source's class has it: the keys did not reach it
    assert probe.not_in_source_class(model, moved) == ([], "Qwen2ForCausalLM")
    assert probe.defined_in(WithQkNorm).endswith("test_framework_load_merged.py")
    assert probe._shape("model.layers.11.mlp.experts.3.weight") == "experts.N.weight"
