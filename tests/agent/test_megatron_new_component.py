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
    them unless the model reads the list of layer outputs (LLaVA's vision_feature_layer) at an entry that has not
    passed the post norm; a norm the names do not place is named as not built."""
    from msmigrate.agent.routes.megatron.new_component import outside_norms

    shapes = {"vt.emb.patch.weight": [8, 3, 2, 2], "vt.enc.layers.0.norm.weight": [8], "vt.pre_ln.weight": [8],
              "vt.pre_ln.bias": [8], "vt.post_norm.weight": [8], "vt.mystery_norm.weight": [8],
              "vt.head.weight": [4, 8]}
    carried, skipped = outside_norms(shapes, "vt.emb.patch.weight", 8, {}, {})
    assert carried == [{"name": "post_norm", "place": "post", "bias": False},
                       {"name": "pre_ln", "place": "pre", "bias": True}]
    assert skipped == ["vt.mystery_norm"]
    carried, skipped = outside_norms(shapes, "vt.emb.patch.weight", 8, {}, {"vision_feature_layer": -2})
    assert [n["name"] for n in carried] == ["pre_ln"] and "vt.post_norm (features from layer -2, not post-normed)" in skipped
    # the last entry: as measured in the source's runtime (raw last layer under transformers 5, post-normed under 4.57)
    for measured in (None, False):
        carried, skipped = outside_norms(shapes, "vt.emb.patch.weight", 8, {}, {"vision_feature_layer": -1}, measured)
        assert [n["name"] for n in carried] == ["pre_ln"] and "vt.post_norm (features from layer -1, not post-normed)" in skipped
    vision = {"num_hidden_layers": 2}
    for layer in (-1, 2):  # the last of the 3 entries (the embeddings, then one per layer), either way it is named
        carried, _ = outside_norms(shapes, "vt.emb.patch.weight", 8, vision, {"vision_feature_layer": layer}, True)
        assert {"name": "post_norm", "place": "post", "bias": False} in carried, layer
    # a post-normed last entry says nothing of the entries before it
    carried, _ = outside_norms(shapes, "vt.emb.patch.weight", 8, vision, {"vision_feature_layer": -2}, True)
    assert [n["name"] for n in carried] == ["pre_ln"]


def test_block_layout_and_mask_follow_the_closest_forward(tmp_path):
    """The new class feeds the block as the closest encoder does: sequence-first when the closest permutes its
    input to [s, b, h] before the call, and an all-visible mask when the closest fills a missing one; a closest
    that flattens the patches passes them flat."""
    from msmigrate.agent.routes.megatron.new_component import _block_of

    seq_first = '''from blocks import Block


class Enc:
    def __init__(self, config, transformer_layer_spec):
        self.decoder = Block(config=config, spec=transformer_layer_spec)

    def forward(self, pixel_values, attention_mask=None):
        x = self.conv(pixel_values)
        x = x.permute(1, 0, 2).contiguous()
        if attention_mask is None:
            attention_mask = make_mask()
        x = self.decoder(x, attention_mask)
        return x
'''
    (tmp_path / "enc.py").write_text(seq_first)
    b = _block_of(tmp_path, "enc.py:Enc", "Enc")
    assert b["seq_first"] and b["mask"] == "attention_mask" and b["forward"] == "self.decoder(x, attention_mask)"
    flat = seq_first.replace("x = x.permute(1, 0, 2).contiguous()", "x = x.reshape(-1, x.shape[-1])").replace(
        "        if attention_mask is None:\n            attention_mask = make_mask()\n", "")
    (tmp_path / "enc.py").write_text(flat)
    b = _block_of(tmp_path, "enc.py:Enc", "Enc")
    assert not b["seq_first"] and b["mask"] is None


def test_a_mask_the_closest_fills_only_off_the_fused_path_is_filled_only_there(tmp_path):
    """The closest fills a missing mask only when it does not run fused attention (``if mask is None and not
    self.use_flash_attn``): the new class carries that whole test, the __init__ line it reads and that line's
    import, so on the fused path it passes no mask, as the closest does (there a given mask is combined with the
    kernel's pre/next token band, and MindSpeed's next-tokens default 0 turns an all-visible mask causal)."""
    from msmigrate.agent.routes.megatron.new_component import EncoderDesign, _block_of, _render_class

    (tmp_path / "enc.py").write_text('''from blocks import Block
from framework.args import get_args as args_of


class Enc:
    def __init__(self, config, transformer_layer_spec):
        self.fused = getattr(args_of(), "use_flash_attn", False)
        self.decoder = Block(config=config, spec=transformer_layer_spec)

    def forward(self, pixel_values, attention_mask=None):
        x = self.conv(pixel_values)
        x = x.permute(1, 0, 2).contiguous()
        if attention_mask is None and not self.fused:
            attention_mask = make_mask()
        x = self.decoder(x, attention_mask)
        return x
''')
    b = _block_of(tmp_path, "enc.py:Enc", "Enc")
    assert b["mask"] == "attention_mask"
    assert b["mask_when"] == {"test": "attention_mask is None and (not self.fused)",
                              "init": ["self.fused = getattr(args_of(), 'use_flash_attn', False)"],
                              "imports": ["from framework.args import get_args as args_of"]}
    d = EncoderDesign(model_id="t_vit", class_name="TViT", json_fields={"class_token_len": 0, "num_positions": 0})
    code = _render_class(d, b, patch_bias=True)
    ast.parse(code)
    assert "from framework.args import get_args as args_of" in code
    assert "self.fused = getattr(args_of(), 'use_flash_attn', False)" in code
    assert "if attention_mask is None and (not self.fused):" in code and "if attention_mask is None:" not in code
    # a test that reads a self attribute the closest's __init__ never sets cannot be carried: unconditional fill
    (tmp_path / "enc.py").write_text((tmp_path / "enc.py").read_text().replace("self.fused = ", "fused = "))
    b = _block_of(tmp_path, "enc.py:Enc", "Enc")
    assert b["mask_when"] is None and "if attention_mask is None:" in _render_class(d, b, patch_bias=True)
