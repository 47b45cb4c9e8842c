"""The numerics a model JSON section fixes (activation, norm type, gated MLP, linear biases), read from real
transformers tiny models' config.json and safetensors headers, and G3 failing a JSON that carries another family's
numerics (a Qwen2-VL source on the Qwen2.5-VL example)."""
import json
import shutil

import pytest

from msmigrate.testbeds.fixtures import build_source
from msmigrate.testbeds.megatron_standin import EXAMPLE
from msmigrate.tools.megatron.config_check import check_megatron_config
from msmigrate.tools.megatron.encoder_structure import weight_shapes
from msmigrate.tools.megatron.numerics import numerics_problems, source_numerics, weight_numerics


def _facts(src, role):
    cfg = json.loads((src / "config.json").read_text())
    sub = cfg.get("vision_config") if role == "vision_encoder" else (cfg.get("text_config") or cfg)
    return {k: v.value for k, v in source_numerics(sub, weight_shapes(src), role).items()}


def test_qwen2_vl_vision_tower_is_layernorm_quick_gelu_plain_mlp(source_model):
    assert _facts(source_model, "vision_encoder") == {
        "activation_func": "quick_gelu", "normalization": "LayerNorm", "gated_linear_unit": False,
        "add_qkv_bias": True, "add_bias_linear": True}


def test_qwen2_vl_text_decoder(source_model):
    f = _facts(source_model, "text_decoder")
    assert f == {"activation_func": "silu", "normalization": "RMSNorm", "gated_linear_unit": True,
                 "add_qkv_bias": True, "add_bias_linear": False}


def test_qwen2_5_vl_vision_tower_is_rmsnorm_silu_gated(tmp_path):
    src = build_source("qwen2_5_vl", tmp_path / "q25")
    f = _facts(src, "vision_encoder")
    assert f["activation_func"] == "silu" and f["normalization"] == "RMSNorm" and f["gated_linear_unit"] is True


def test_ambiguous_blocks_give_no_fact():
    # mixed norm biases, an MoE block's many matrices: nothing is guessed
    shapes = {"model.layers.0.ln_a.weight": [8], "model.layers.0.ln_a.bias": [8], "model.layers.0.ln_b.weight": [8],
              **{f"model.layers.0.mlp.experts.{i}.w{j}.weight": [8, 8] for i in range(2) for j in (1, 2, 3)}}
    assert weight_numerics(shapes, "text_decoder") == {}
    assert weight_numerics({"lm_head.weight": [8, 8]}, "text_decoder") == {}


def test_only_fields_the_section_has_are_compared(source_model):
    facts = source_numerics({"hidden_act": "quick_gelu"}, weight_shapes(source_model), "vision_encoder")
    assert numerics_problems("vision_encoder", {"num_layers": 2}, facts) == []
    probs = numerics_problems("vision_encoder", {"normalization": "RMSNorm", "activation_func": "quick_gelu"}, facts)
    assert len(probs) == 1 and probs[0].startswith("vision_encoder.normalization is 'RMSNorm', the source has "
                                                   "'LayerNorm' (")


@pytest.fixture
def qwen2_vl_on_the_example(standin_copy, source_model):
    """The stand-in's Qwen2.5-VL example with its sizes set to a Qwen2-VL source, numerics left as copied."""
    cfg = json.loads((source_model / "config.json").read_text())
    path = standin_copy / EXAMPLE["model_json"]
    model = json.loads(path.read_text())
    enc, dec, v = model["image_encoder"]["vision_encoder"], model["text_decoder"], cfg["vision_config"]
    enc.update(num_layers=v["depth"], hidden_size=v["embed_dim"], num_attention_heads=v["num_heads"])
    enc.pop("pipeline_num_layers")
    text = cfg.get("text_config") or cfg
    dec.update(num_layers=text["num_hidden_layers"], hidden_size=text["hidden_size"],
               num_attention_heads=text["num_attention_heads"], num_query_groups=text["num_key_value_heads"],
               vocab_size=text["vocab_size"], group_query_attention=True)
    dec.pop("pipeline_num_layers")
    path.write_text(json.dumps(model))
    return standin_copy, path


def test_g3_fails_another_familys_numerics(qwen2_vl_on_the_example, source_model):
    root, _ = qwen2_vl_on_the_example
    r = check_megatron_config(root, EXAMPLE["model_json"], EXAMPLE["script"], source=source_model)
    numerics = [p for p in r.problems if "numerics must follow the source" in p]
    assert not r.ok
    assert any(p.startswith("vision_encoder.activation_func is 'silu', the source has 'quick_gelu' (config.json "
                            "hidden_act)") for p in numerics), r.problems
    assert any(p.startswith("vision_encoder.normalization is 'RMSNorm', the source has 'LayerNorm'") for p in numerics)
    assert any(p.startswith("vision_encoder.gated_linear_unit is True, the source has False") for p in numerics)
    assert not any(p.startswith("text_decoder.") for p in numerics), numerics  # the decoder's do match
    # with the source's numerics the same JSON passes those checks
    path = root / EXAMPLE["model_json"]
    model = json.loads(path.read_text())
    model["image_encoder"]["vision_encoder"].update(activation_func="quick_gelu", normalization="LayerNorm",
                                                    gated_linear_unit=False)
    path.write_text(json.dumps(model))
    r = check_megatron_config(root, EXAMPLE["model_json"], EXAMPLE["script"], source=source_model)
    assert not any("numerics" in p for p in r.problems), r.problems


def test_g3_reads_no_weights_without_safetensors(standin_copy, source_model, tmp_path):
    # a source folder with only its config.json: the activation is still checked, the weight facts are not
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(source_model / "config.json", bare / "config.json")
    facts = source_numerics(json.loads((bare / "config.json").read_text())["vision_config"], weight_shapes(bare),
                            "vision_encoder")
    assert set(facts) == {"activation_func"}
