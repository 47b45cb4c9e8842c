"""Component matching against the real MindSpeed-MM (held out: the matcher was written on synthetic examples):
known Qwen-family fixtures get the encoder / decoder ids the real pretrain_vlm.py examples configure for their
features; launch-script config for the draft is found the way the plan finds it."""

from __future__ import annotations

import json

import pytest

from msmigrate.agent.routes.megatron.components import example_components, match_components, route_model_jsons, weight_names
from msmigrate.agent.routes.megatron.plan import _prefer_shared_example, example_script
from msmigrate.tools.megatron.encoder_structure import weight_shapes

pytestmark = pytest.mark.realmm


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    from msmigrate.testbeds.fixtures import build_source

    root = tmp_path_factory.mktemp("megatron_sources")
    return {f: build_source(f, root / f) for f in ("qwen2_5_vl", "qwen3_vl", "llava", "gemma3", "glm4v")}


def match(source, mm):
    return match_components(json.loads((source / "config.json").read_text()), mm, None, weight_names(source),
                            weight_shapes(source))


def test_route_examples_are_the_pretrain_vlm_ones(realmm_snapshot):
    mm = realmm_snapshot / "MindSpeed-MM"
    route = route_model_jsons(mm)
    assert "examples/qwen2.5vl/model_7b.json" in route
    assert "examples/magistral-2509/model.json" not in route  # another entry point's model JSON


def test_window_attention_encoder_and_qwen2_decoder(realmm_snapshot, sources):
    mm = realmm_snapshot / "MindSpeed-MM"
    m = match(sources["qwen2_5_vl"], mm)
    assert m["vision_encoder"].model_id in ("qwen2vit", "qwen2_5_vit")
    assert {"fullatt_block_indexes", "window_attn_size"} <= set(m["vision_encoder"].distinctive_in_source)
    assert m["text_decoder"].model_id in ("qwen2_5_lm", "qwen2lm") and m["vision_projector"].model_id
    _prefer_shared_example(m, example_components(mm), mm)  # what the plan does next
    script, data = example_script(mm, m["text_decoder"].example)
    assert script and "pretrain_vlm.py" in (mm / script).read_text() and data


def test_deepstack_encoder_and_qk_norm_decoder(realmm_snapshot, sources):
    m = match(sources["qwen3_vl"], realmm_snapshot / "MindSpeed-MM")
    assert m["vision_encoder"].model_id == "qwen3vit"
    # qk_layernorm has no config field in HF: the weight names (self_attn.q_norm) show it
    assert m["text_decoder"].model_id == "qwen3_lm" and "qk_layernorm" in m["text_decoder"].distinctive_in_source


def test_non_qwen_encoders_are_not_matched_to_a_qwen_one(realmm_snapshot, sources):
    """What each registered encoder class builds (read from the real code) against the source's weights: a CLIP
    tower gets the registered CLIP class, GLM-4V's tower (3-D patch conv, a learned table and a downsampling conv)
    GLM's, and a SigLIP tower (no class token) none: a new component, with the differing fact named."""
    mm = realmm_snapshot / "MindSpeed-MM"
    got = {f: match(sources[f], mm)["vision_encoder"] for f in ("llava", "gemma3", "glm4v")}
    assert all(m.model_id not in ("qwen2vit", "qwen2_5_vit", "qwen3vit") for m in got.values())
    assert got["llava"].model_id == "clip" and got["glm4v"].model_id == "glm4v_vit"
    assert got["gemma3"].model_id is None and got["gemma3"].closest == "clip"
    assert got["gemma3"].missing == ["class_token: source False, component True"]


def test_projectors_matched_by_what_they_build(realmm_snapshot, sources):
    """Each registered projector class read by AST (the real MultimodalProjector builds ``mlp`` and ``lnmlp`` in
    one class, by model_id) against the source's projector tensors: Qwen's merger (norm, 2x2 patch merge, two
    matrices) is ``lnmlp``, LLaVA's linear-GELU-linear ``mlp``, and Gemma 3's (norm, one matrix, an average pool
    from 16 patches to 4 tokens) fits none: a new projector, with the differing facts named."""
    mm = realmm_snapshot / "MindSpeed-MM"
    got = {f: match(sources[f], mm)["vision_projector"] for f in ("qwen2_5_vl", "llava", "gemma3")}
    assert got["qwen2_5_vl"].model_id == "lnmlp" and got["qwen2_5_vl"].structure["merge"] == 4
    assert got["llava"].model_id == "mlp" and "builds the source's projector" in got["llava"].why
    gemma = got["gemma3"]
    assert gemma.model_id is None and "a new vision_projector component is needed" in gemma.why
    assert "pooling: source True, component False" in gemma.missing
    assert any(d.startswith("matrices: source 1") for d in gemma.missing)


def test_llama_and_gemma_decoders_are_not_reused_as_a_qwen_one(realmm_snapshot, sources):
    """Every real pretrain_vlm.py example of qwen2_5_lm sets add_qkv_bias true; LLaVA's LLaMA has no q/k/v bias, so no
    registered decoder with an example is reused for it, and the differing fact is named. (Its 1-D rope is not among
    them: an mrope decoder is reused for a 1-D rotary source with mrope_section fitted to its head_dim.)"""
    mm = realmm_snapshot / "MindSpeed-MM"
    dec = match(sources["llava"], mm)["text_decoder"]
    assert dec.model_id is None and dec.closest, dec.why
    assert any(d.startswith("add_qkv_bias: source False") for d in dec.missing), dec.missing
    assert not any(d.startswith("position_embedding_type") for d in dec.missing), dec.missing
    assert match(sources["gemma3"], mm)["text_decoder"].model_id is None


def test_template_parity_reads_the_real_registry(realmm_snapshot, real_runtime, tmp_path):
    """The real qwen2vl template (registered through a parameter object) renders the Qwen2.5-VL samples as its own
    chat template does, and LLaVA's USER/ASSISTANT samples not (sources built by the real runtime's transformers,
    which reads their tokenizers)."""
    from msmigrate.testbeds.fixtures.in_runtime import build_source_in_runtime
    from msmigrate.tools.megatron.template_parity import template_parity

    mm = realmm_snapshot / "MindSpeed-MM"
    example = json.loads((mm / "examples/qwen2.5vl/data_3b.json").read_text())
    for fixture, passes in (("qwen2_5_vl", True), ("llava", False)):
        src = build_source_in_runtime(fixture, tmp_path / "src" / fixture, real_runtime)
        doc = json.loads(json.dumps(example))
        doc["dataset_param"]["basic_parameters"]["dataset"] = str(src / "data/train.json")
        (tmp_path / f"{fixture}.json").write_text(json.dumps(doc))
        par = template_parity(real_runtime, mm, str(tmp_path / f"{fixture}.json"), src)
        assert par.error is None and par.ok is passes, (fixture, par.problems)
        assert par.facts["registered_in"] == "mindspeed_mm/data/data_utils/func_utils/template.py"
        assert par.facts["turns_compared"] >= 2
