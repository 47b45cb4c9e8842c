"""The plan compares the numerics fields of the sections the config writer starts from with the source, before
anything is written (blind live run 11's player learned at G3 that the Qwen2.5-VL example's ViT numerics were
carried into a Qwen2-VL JSON), and the LLM's config prompt lists each difference with the source's value."""
from __future__ import annotations

import json

import pytest

from msmigrate.agent.routes.megatron.plan import example_numerics
from msmigrate.prompts.render import render
from msmigrate.prompts.sample_state import sample_vars
from msmigrate.tools.megatron.encoder_structure import weight_shapes

EXAMPLE = "examples/qwen2.5vl/model_tiny.json"


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    from msmigrate.testbeds.megatron_standin import write_megatron_standin

    return write_megatron_standin(tmp_path_factory.mktemp("mm") / "mm", git_init=False, with_assets=False)


def _numerics(standin, source, new_encoder=None):
    cfg = json.loads((source / "config.json").read_text())
    return example_numerics(standin, EXAMPLE, cfg, weight_shapes(source), new_encoder)


def test_a_neighbouring_familys_example_is_flagged_field_by_field(standin, source_model):
    """Qwen2-VL (LayerNorm, quick_gelu, fc1/fc2 with biases) against the Qwen2.5-VL example's ViT."""
    got = _numerics(standin, source_model)
    vit = {d["field"]: d for d in got["differs"] if d["role"] == "vision_encoder"}
    assert vit["activation_func"]["source"] == "quick_gelu" and vit["activation_func"]["have"] != "quick_gelu"
    assert vit["normalization"]["source"] == "LayerNorm" and "with a bias" in vit["normalization"]["evidence"]
    assert vit["gated_linear_unit"]["source"] is False
    assert set(got["compared"]["vision_encoder"]) >= set(vit)


def test_the_same_familys_example_agrees(standin, tmp_path):
    from msmigrate.testbeds.fixtures import build_source

    got = _numerics(standin, build_source("qwen2_5_vl", tmp_path / "q25"))
    assert got["differs"] == [] and got["compared"]["vision_encoder"] and got["compared"]["text_decoder"]


def test_a_new_encoder_is_compared_on_its_own_fields(standin, source_model):
    got = _numerics(standin, source_model, {"json_fields": {"model_id": "x_vit", "activation_func": "quick_gelu",
                                                             "normalization": "LayerNorm"}})
    assert not [d for d in got["differs"] if d["role"] == "vision_encoder"]
    assert got["compared"]["vision_encoder"] == ["activation_func", "normalization"]


def test_the_config_prompt_lists_each_difference_with_the_sources_value():
    variables = sample_vars("megatron_config", live_index=False)
    variables["plan"] = {**variables["plan"], "numerics": {"compared": {"vision_encoder": ["activation_func"]},
                         "differs": [{"role": "vision_encoder", "field": "activation_func", "have": "silu",
                                      "source": "quick_gelu", "evidence": "config.json hidden_act"}]}}
    text = " ".join(render("megatron_config", **variables).split())
    assert ("`vision_encoder.activation_func`: example \"silu\", source \"quick_gelu\" (config.json hidden_act)"
            in text)
    agree = " ".join(render("megatron_config", **sample_vars("megatron_config", live_index=False)).split())
    assert "the starting sections already agree with the source there" in agree
