"""Qwen3-VL's deepstack mergers on the real MindSpeed-MM: the real qwen3vit's layer (read by AST) builds them as a
``deepstack_layer`` on the layers ``deepstack_visual_indexes`` names, with the paired projector's class and a
post-shuffle norm, and the real Qwen3VLMegatronConverter puts each HF merger on that attribute of its tower layer
(found by value in the converted checkpoint, not by reading the converter's rename table)."""
from __future__ import annotations

import json

import pytest

from msmigrate.agent.routes.megatron.components import match_components, weight_names
from msmigrate.tools.megatron.converter_roundtrip import target_converter_roundtrip
from msmigrate.tools.megatron.encoder_structure import weight_shapes

pytestmark = pytest.mark.realmm


@pytest.fixture(scope="module")
def qwen3_vl(tmp_path_factory):
    from msmigrate.testbeds.fixtures import build_source

    return build_source("qwen3_vl", tmp_path_factory.mktemp("taps") / "qwen3_vl")


def test_real_qwen3vit_builds_the_sources_deepstack_mergers(realmm_snapshot, qwen3_vl):
    mm = realmm_snapshot / "MindSpeed-MM"
    cfg = json.loads((qwen3_vl / "config.json").read_text())
    enc = match_components(cfg, mm, None, weight_names(qwen3_vl), weight_shapes(qwen3_vl))["vision_encoder"]
    assert enc.model_id == "qwen3vit" and enc.taps["missing"] == []
    comp = enc.taps["component"]
    assert (comp["layer_class"], comp["attr"], comp["index_field"]) == (
        "Qwen3VLVisionTransformerLayer", "deepstack_layer", "deepstack_visual_indexes")
    assert comp["projector_class"] == "MultimodalProjector" and comp["init_args"] == {"use_postshuffle_norm": True}
    assert comp["structure"]["norm_at_input"] is True and enc.taps["source"]["structure"]["norm_at_input"] is True
    assert enc.taps["converter"] == {"hf_list": "model.visual.deepstack_merger_list",
                                     "index_field": "deepstack_visual_indexes", "attr": "deepstack_layer"}
    assert "its layers build the source's 1 per-layer merger(s)" in enc.why


def test_real_converter_puts_each_merger_on_its_tower_layer(realmm_snapshot, real_runtime, qwen3_vl, tmp_path):
    """Two mergers fed from tower layers 1 and 3 of 4: each HF merger matrix is found, by value, under
    ``layers.<k>.deepstack_layer`` of its own layer. An attribute the converter does not write is caught."""
    mm = realmm_snapshot / "MindSpeed-MM"
    cfg = json.loads((qwen3_vl / "config.json").read_text())
    enc = match_components(cfg, mm, None, weight_names(qwen3_vl), weight_shapes(qwen3_vl))["vision_encoder"]
    # the fixture is saved by transformers 5 (rope_parameters); the real runtime's 4.57 reads rope_scaling
    text = cfg["text_config"]
    rope = text.pop("rope_parameters")
    text["rope_theta"], text["rope_scaling"] = rope.pop("rope_theta"), rope
    cfg["vision_config"] |= {"depth": 4, "deepstack_visual_indexes": [1, 3]}
    ok = target_converter_roundtrip(real_runtime, mm, "Qwen3VLMegatronConverter", tmp_path / "ok", tiny_config=cfg,
                                    extra_paths=[realmm_snapshot / "MindSpeed"], taps=enc.taps["converter"])
    assert ok.ok, (ok.error, ok.problems)
    assert ok.facts["tap_matrices_checked"] == 4  # 2 mergers x 2 matrices
    wrong = {**enc.taps["converter"], "attr": "merger"}
    bad = target_converter_roundtrip(real_runtime, mm, "Qwen3VLMegatronConverter", tmp_path / "bad", tiny_config=cfg,
                                     extra_paths=[realmm_snapshot / "MindSpeed"], taps=wrong)
    assert not bad.ok and any("not on layers.1.merger" in p for p in bad.problems)
