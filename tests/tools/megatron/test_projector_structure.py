"""What a vision projector builds, from both sides: a registered projector class's code (AST, branches on model_id
decided per id) and the source's projector tensors (names and shapes). The shape dicts use transformers' layouts
of three kinds of projector (two matrices; a norm, a patch merge and two matrices; a norm, one bare matrix and an
average pool stated by the config); the expected facts come from the shapes, not from the names."""
from __future__ import annotations

from msmigrate.agent.routes.megatron.components import ComponentMatch, example_components, match_projector
from msmigrate.tools.megatron.projector_structure import (component_projector, projector_diff, projector_structures,
                                                          source_projector, source_projector_of)

V, H, VOCAB = 32, 64, 512


def tower(prefix: str, conv: list[int]) -> dict[str, list[int]]:
    out = {f"{prefix}.patch.weight": conv}
    for i in range(2):
        out |= {f"{prefix}.layers.{i}.attn.qkv.weight": [3 * V, V], f"{prefix}.layers.{i}.norm.weight": [V]}
    return out


def lm(prefix: str) -> dict[str, list[int]]:
    out = {f"{prefix}.embed.weight": [VOCAB, H], "head.weight": [VOCAB, H], f"{prefix}.norm.weight": [H]}
    for i in range(2):
        out |= {f"{prefix}.layers.{i}.o.weight": [H, H], f"{prefix}.layers.{i}.down.weight": [H, 4 * H]}
    return out


TWO_LINEARS = {**tower("vt", [V, 3, 7, 7]), **lm("lm"), "bridge.l1.weight": [H, V], "bridge.l1.bias": [H],
               "bridge.l2.weight": [H, H], "bridge.l2.bias": [H]}
MERGER = {**tower("vis", [V, 3, 2, 14, 14]), **lm("lm"), "vis.merge.ln.weight": [V],
          "vis.merge.seq.0.weight": [4 * V, 4 * V], "vis.merge.seq.0.bias": [4 * V],
          "vis.merge.seq.2.weight": [H, 4 * V], "vis.merge.seq.2.bias": [H]}
POOLED = {**tower("vt", [V, 3, 7, 7]), **lm("lm"), "bridge.soft_norm.weight": [V], "bridge.proj_matrix": [V, H]}


def src(shapes, tokens=None, patches=None):
    patch = next(n for n, s in shapes.items() if len(s) >= 4)
    return source_projector(shapes, H, V, patch, VOCAB, tokens, patches)


def test_source_side_reads_matrices_norms_width_change_and_pooling():
    two = src(TWO_LINEARS)
    assert (two.root, two.facts()) == ("bridge", {"matrices": 2, "norms": 0, "width_change": False, "pooling": None})
    assert two.widths == {"input": V, "inner": H, "output": H} and two.bias
    merged = src(MERGER)  # the Sequential's 0 / 2 is not a layer stack; the root stops below the tower
    assert merged.root == "vis.merge" and merged.facts() == {"matrices": 2, "norms": 1, "width_change": True,
                                                             "pooling": None}
    assert merged.merge == 4 and merged.norm == "rmsnorm"
    pooled = src(POOLED, tokens=4, patches=16)  # a bare [in, out] matrix; 16 patches become 4 tokens
    assert pooled.facts() == {"matrices": 1, "norms": 1, "width_change": False, "pooling": True}
    assert src(POOLED, tokens=16, patches=16).pooling is False
    assert src({**tower("vt", [V, 3, 7, 7]), **lm("lm")}) is None  # nothing ends in the text width outside


def test_source_from_config_uses_the_last_conv_as_the_encoders_output_width():
    # a downsampling conv after the blocks (V -> H): the merger's H input is no width change
    shapes = {**tower("visual", [V, 3, 2, 14, 14]), **lm("lm"), "visual.down.weight": [H, V, 2, 2],
              "visual.merger.proj.weight": [H, H], "visual.merger.norm.weight": [H],
              "visual.merger.norm.bias": [H]}
    cfg = {"text_config": {"hidden_size": H, "vocab_size": VOCAB, "num_attention_heads": 4},
           "vision_config": {"hidden_size": V}}
    got = source_projector_of(cfg, shapes)
    assert got.width_change is False and got.norm == "layernorm"


def test_standin_classes_read_per_model_id(megatron_standin):
    got = projector_structures(megatron_standin)
    assert got["mlp"].facts() == {"matrices": 2, "norms": 0, "width_change": False, "pooling": False}
    assert got["lnmlp"].facts() == {"matrices": 2, "norms": 1, "width_change": True, "pooling": False}
    assert projector_diff(src(TWO_LINEARS), got["mlp"]) == []
    assert projector_diff(src(MERGER), got["lnmlp"]) == []
    assert projector_diff(src(TWO_LINEARS), got["lnmlp"]) == ["norms: source 0, component 1",
                                                              "width_change: source False, component True"]


def test_an_undecidable_branch_is_unknown_not_a_fit(standin_copy):
    path = standin_copy / "mindspeed_mm/models/vision/projectors/multimodal_projector.py"
    path.write_text(path.read_text().replace('if self.projector_type == "mlp":',
                                             'if config.mlp_depth == 2:'))
    got = component_projector(standin_copy, "MultimodalProjector", "mlp")
    assert got.error and "config.mlp_depth == 2" in got.error


def test_a_norm_added_to_the_class_changes_the_match(standin_copy):
    """The match follows the class's code: give ``mlp`` a norm and the two-matrix projector fits nothing."""
    enc = ComponentMatch(role="vision_encoder", model_id="qwen2vit")
    examples = example_components(standin_copy)
    before = match_projector(enc, examples, None, src(TWO_LINEARS), projector_structures(standin_copy))
    assert before.model_id == "mlp" and "not the one the encoder's example pairs with (lnmlp" in before.why
    path = standin_copy / "mindspeed_mm/models/vision/projectors/multimodal_projector.py"
    path.write_text(path.read_text().replace(
        'if self.projector_type == "mlp":\n',
        'if self.projector_type == "mlp":\n            self.pre_norm = RMSNorm(config.input_size)\n'))
    after = match_projector(enc, examples, None, src(TWO_LINEARS), projector_structures(standin_copy))
    assert after.model_id is None and after.closest and "a new vision_projector component is needed" in after.why
    pooled = match_projector(enc, examples, None, src(POOLED, 4, 16), projector_structures(standin_copy))
    assert pooled.model_id is None and "pooling: source True, component False" in pooled.missing
