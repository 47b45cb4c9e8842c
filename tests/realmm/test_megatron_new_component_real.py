"""A new vision encoder registered into the real MindSpeed-MM (held out: the writer was built on the stand-in).
Gemma 3's SigLIP tower (2-D patch conv with bias, learned positions, no class token) is built by no registered
class (closest: CLIP, which adds a class token). After the design's edits on a copy of the snapshot, the real
registry and vit layer-spec table hold the new id, the class reads back as what the source's weights show, and the
static config check (the real parser's flags, registries, sizes) passes a real example's model JSON whose vision
encoder is the new one. What this cannot prove here: that the class imports (the real block needs megatron and
torch_npu) or computes SigLIP's forward."""
from __future__ import annotations

import json
import shutil

import pytest

from msmigrate.agent.routes.megatron.components import VISION_KEYS, match_components, weight_names
from msmigrate.agent.routes.megatron.new_component import design_encoder
from msmigrate.tools.megatron.config_check import check_megatron_config, definition_paths
from msmigrate.tools.megatron.encoder_structure import encoder_structures, source_structure, weight_shapes
from msmigrate.tools.megatron.registry import read_registry, registered_ids

pytestmark = pytest.mark.realmm


def test_new_siglip_encoder_registered_in_the_real_snapshot(realmm_snapshot, real_runtime, tmp_path):
    from msmigrate.testbeds.fixtures import build_source

    src = build_source("gemma3", tmp_path / "gemma3")
    cfg = json.loads((src / "config.json").read_text())
    shapes = weight_shapes(src)
    mm = tmp_path / "MindSpeed-MM"
    shutil.copytree(realmm_snapshot / "MindSpeed-MM", mm)
    m = match_components(cfg, mm, registered_ids(mm), weight_names(src), shapes)["vision_encoder"]
    assert m.model_id is None and m.closest == "clip"
    vision = next(cfg[k] for k in VISION_KEYS if isinstance(cfg.get(k), dict))
    d = design_encoder(mm, m.to_dict(), vision, shapes, cfg["model_type"])
    assert d.error is None, d.error
    # the real CLIP class's block, import and call are reused; CLIP has no vit_layer_specs entry, so the spec is
    # the nearest registered encoder's that has one
    assert "vision_transformer_block import VisionTransformerBlock" in d.code
    assert "has none" in d.reuses["layer_spec"]
    for rel, text in {d.module_path: d.code, **d.edits}.items():
        (mm / rel).write_text(text)
    reg = read_registry(mm)
    assert d.model_id in reg.ids_for("vision_encoder")
    assert {r.name for r in reg.registries if d.model_id in r.ids} == {"VISION_ENCODER_MAPPINGS", "vit_layer_specs"}
    assert encoder_structures(mm)[d.model_id].facts() == source_structure(shapes).facts()
    # a real example pair with the new encoder in its model JSON passes the static config check
    model = json.loads((mm / "examples/qwen2.5vl/model_7b.json").read_text())
    old = model["image_encoder"]["vision_encoder"]
    # the script runs pp=2: the encoder's layers on the first stage, as the framework's examples place it
    stages = [d.json_fields["num_layers"]] + [0] * (len(old["pipeline_num_layers"]) - 1)
    model["image_encoder"]["vision_encoder"] = {**d.json_fields, "pipeline_num_layers": stages}
    (mm / "examples/qwen2.5vl/model_7b.json").write_text(json.dumps(model))
    res = check_megatron_config(mm, "examples/qwen2.5vl/model_7b.json",
                                "examples/qwen2.5vl/finetune_qwen2_5_vl_7b.sh",
                                definitions=definition_paths(mm, [realmm_snapshot / "MindSpeed"]))
    assert res.error is None and res.ok, res.problems
    assert res.facts["model_ids"]["image_encoder.vision_encoder"] == d.model_id
    # building it needs the accelerator environment: the probe names the module, G1 reports it as such
    from msmigrate.agent.routes.megatron.gates.slots import new_component_record

    rec = new_component_record(real_runtime, mm, d.to_dict())
    assert not rec["passed"] and rec["needs_accelerator"], rec["summary"]
    assert "the accelerator environment" in rec["summary"] and not rec["failure_text"]


def test_new_pooled_projector_registered_in_the_real_snapshot(realmm_snapshot, real_runtime, tmp_path):
    """Gemma 3's projector (norm, one bare matrix, average pool) is built by no registered real projector; the new
    class is registered next to the new encoder in the same real registry file (both entries kept, lines only
    added), reads back from the real tree as what the weights show, and a real example's model JSON selecting it
    passes the static config check. Building it needs megatron (the real MultiModalModule): G1 names that."""
    from msmigrate.agent.routes.megatron.gates.new_projector_gate import new_projector_record
    from msmigrate.agent.routes.megatron.new_projector import design_projector
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.tools.megatron.projector_structure import projector_structures

    src = build_source("gemma3", tmp_path / "gemma3")
    cfg = json.loads((src / "config.json").read_text())
    shapes = weight_shapes(src)
    mm = tmp_path / "MindSpeed-MM"
    shutil.copytree(realmm_snapshot / "MindSpeed-MM", mm)
    m = match_components(cfg, mm, registered_ids(mm), weight_names(src), shapes)
    proj = m["vision_projector"]
    assert proj.model_id is None and "a new vision_projector component is needed" in proj.why
    vision = next(cfg[k] for k in VISION_KEYS if isinstance(cfg.get(k), dict))
    enc = design_encoder(mm, m["vision_encoder"].to_dict(), vision, shapes, cfg["model_type"], cfg)
    d = design_projector(mm, proj.to_dict(), cfg, cfg["model_type"], cfg["text_config"]["hidden_size"], enc.edits)
    assert d.error is None, d.error
    before = (mm / "mindspeed_mm/models/vision/vision_model.py").read_text()
    for rel, text in {enc.module_path: enc.code, **enc.edits, d.module_path: d.code, **d.edits}.items():
        (mm / rel).write_text(text)
    after = (mm / "mindspeed_mm/models/vision/vision_model.py").read_text()
    assert set(before.splitlines()) - set(after.splitlines()) <= {"}"}
    reg = read_registry(mm)
    assert {r.name for r in reg.registries if d.model_id in r.ids} == {"VISION_PROJECTION_MAPPINGS"}
    assert enc.model_id in reg.ids_for("vision_encoder")
    assert projector_structures(mm)[d.model_id].facts() == {"matrices": 1, "norms": 1, "width_change": False,
                                                            "pooling": True}
    model = json.loads((mm / "examples/qwen2.5vl/model_7b.json").read_text())
    model["image_encoder"]["vision_projector"] = d.json_fields
    (mm / "examples/qwen2.5vl/model_7b.json").write_text(json.dumps(model))
    res = check_megatron_config(mm, "examples/qwen2.5vl/model_7b.json",
                                "examples/qwen2.5vl/finetune_qwen2_5_vl_7b.sh",
                                definitions=definition_paths(mm, [realmm_snapshot / "MindSpeed"]))
    assert res.error is None and res.ok, res.problems
    assert res.facts["model_ids"]["image_encoder.vision_projector"] == d.model_id
    rec = new_projector_record(real_runtime, mm, src, tmp_path / "conv",
                               {"new_projector": d.to_dict(), "new_component": enc.to_dict()})
    assert not rec["passed"] and rec["needs_accelerator"] and not rec["failure_text"], rec["summary"]
    assert "the accelerator environment" in rec["summary"]
