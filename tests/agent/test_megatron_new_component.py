"""A new vision encoder registered the framework's way on the Megatron stand-in (only a Qwen2-VL-style tower is
registered there): the design is derived from the source's weights and the closest registered class's code; after
its edits the target's own registry and layer-spec table hold the new id, the class builds what the source's
weights show (read back by the same AST reader that found the mismatch), and it runs a forward on CPU."""
from __future__ import annotations

import ast
import sys

import pytest

from msmigrate.agent.routes.megatron.components import match_components
from msmigrate.agent.routes.megatron.new_component import _insert_entry, design_encoder
from msmigrate.tools.megatron.encoder_structure import encoder_structures, source_structure
from msmigrate.tools.megatron.registry import read_registry, registered_ids

# a CLIP-like tower (names that do not say CLIP): 2-D patch conv without bias, class token, 17 positions (16 + 1)
SHAPES = {"vision_tower.emb.patch_embedding.weight": [32, 3, 7, 7], "vision_tower.emb.class_embedding": [32],
          "vision_tower.emb.position_embedding.weight": [17, 32], "vision_tower.layers.0.ln.weight": [32],
          "vision_tower.layers.0.ln.bias": [32], "model.layers.0.self_attn.q_proj.weight": [64, 64]}
VISION = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 2, "num_hidden_layers": 2,
          "patch_size": 7, "image_size": 28, "hidden_act": "quick_gelu", "layer_norm_eps": 1e-5}
CFG = {"model_type": "tower", "vision_config": VISION,
       "text_config": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4}}

@pytest.fixture
def standin(tmp_path):
    from msmigrate.testbeds.megatron_standin import write_megatron_standin

    return write_megatron_standin(tmp_path / "mm", git_init=False, with_assets=False)


def design(standin):
    m = match_components(CFG, standin, registered_ids(standin), shapes=SHAPES)["vision_encoder"]
    assert m.model_id is None and m.closest == "qwen2vit"  # ties broken towards the id an example configures
    return design_encoder(standin, m.to_dict(), VISION, SHAPES, "tower")


def test_design_registers_a_new_id_the_framework_way(standin):
    d = design(standin)
    assert d.error is None, d.error
    assert d.model_id == "tower_vit" and d.module_path.startswith("mindspeed_mm/models/vision/vision_encoders/")
    ast.parse(d.code)
    # the block, its import and its call are the closest class's; the spec function is the closest's
    assert "from mindspeed_mm.models.common.standin_layers import TransformerBlock" in d.code
    assert "self.blocks(x.unsqueeze(0), causal=False)" in d.code and "qwen2vit" in d.reuses["layer_spec"]
    assert d.json_fields["num_positions"] == 17 and d.json_fields["class_token_len"] == 1
    assert d.json_fields["normalization"] == "LayerNorm"
    for rel, text in {d.module_path: d.code, **d.edits}.items():
        (standin / rel).write_text(text)
    reg = read_registry(standin)
    assert "tower_vit" in reg.ids_for("vision_encoder")
    assert {r.name for r in reg.registries if "tower_vit" in r.ids} == {"VISION_ENCODER_MAPPINGS", "vit_layer_specs"}
    # what the written class builds, read back from its code, is what the source's weights show
    assert encoder_structures(standin)["tower_vit"].facts() == source_structure(SHAPES).facts()


def test_the_new_class_builds_by_model_id_and_runs_a_forward(standin):
    from msmigrate.tools.megatron.component_forward import component_forward

    d = design(standin)
    for rel, text in {d.module_path: d.code, **d.edits}.items():
        (standin / rel).write_text(text)
    (reg_file, reg), (spec_file, specs) = (d.tables[k].split(":") for k in ("registry", "specs"))
    run = lambda fields: component_forward(sys.executable, standin, registry_file=reg_file, registry=reg,  # noqa
                                           specs_file=spec_file, specs=specs, model_id=d.model_id, fields=fields)
    res = run(d.json_fields)
    assert res.ok, (res.error, res.problems)
    assert res.facts["output_shape"] == [32, 32]  # 2 images x 16 patches (class token dropped), width 32
    assert {"class_embedding", "position_embedding.weight", "patch_embed.weight"} <= set(res.facts["parameters"])
    # a class that hands the class token on to the projector gives one row too many per image: caught
    module = standin / d.module_path
    assert "[:, 1:]" in module.read_text()
    module.write_text(module.read_text().replace("[:, 1:]", "[:, 0:]"))
    bad = run(d.json_fields)
    assert not bad.ok and "output shape [34, 32], want [32, 32]" in bad.problems[0]


def test_a_tower_this_writer_does_not_build_is_refused(standin):
    shapes = {"visual.patch_embed.proj.weight": [32, 3, 2, 14, 14], "visual.downsample.weight": [64, 32, 2, 2],
              "visual.pos_embed.weight": [16, 32]}
    m = match_components(CFG, standin, registered_ids(standin), shapes=shapes)["vision_encoder"]
    assert m.model_id is None and "other_convs" in " ".join(m.missing)
    d = design_encoder(standin, m.to_dict(), VISION, shapes, "tower")
    assert d.error and "2-D patch conv tower only" in d.error and not d.edits


def test_registry_entry_insertion_keeps_the_table_layout():
    multi = 'X = {\n    "a": A,\n    "b": B,\n}\n'
    assert _insert_entry(multi, "X", '"c": C') == 'X = {\n    "a": A,\n    "b": B,\n    "c": C,\n}\n'
    inline = "X = {'a': f,\n     'b': g}\n"
    assert _insert_entry(inline, "X", "'c': g") == "X = {'a': f,\n     'b': g,\n     'c': g,}\n"
    assert _insert_entry(multi, "Y", '"c": C') is None


def test_outside_norms_are_placed_by_name_and_by_the_feature_layer():
    """Norms outside the blocks are carried when the weights show them: ``pre`` before the blocks, ``post`` after
    them unless the model reads an earlier layer (LLaVA's vision_feature_layer -2); a norm the names do not place
    is named as not built."""
    from msmigrate.agent.routes.megatron.new_component import outside_norms

    shapes = {"vt.emb.patch.weight": [8, 3, 2, 2], "vt.enc.layers.0.norm.weight": [8], "vt.pre_ln.weight": [8],
              "vt.pre_ln.bias": [8], "vt.post_norm.weight": [8], "vt.mystery_norm.weight": [8],
              "vt.head.weight": [4, 8]}
    carried, skipped = outside_norms(shapes, "vt.emb.patch.weight", 8, {}, {})
    assert carried == [{"name": "post_norm", "place": "post", "bias": False},
                       {"name": "pre_ln", "place": "pre", "bias": True}]
    assert skipped == ["vt.mystery_norm"]
    carried, skipped = outside_norms(shapes, "vt.emb.patch.weight", 8, {}, {"vision_feature_layer": -2})
    assert [n["name"] for n in carried] == ["pre_ln"] and "vt.post_norm (features from layer -2)" in skipped
