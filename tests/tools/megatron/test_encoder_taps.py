"""Per-layer mergers (Qwen3-VL's deepstack): found in the source's weights by structure, read from the target's
encoder layer by AST, compared; an encoder that does not build them does not fit, and the plan refuses to design
a new encoder that would drop them (the real snapshot's qwen3vit, which builds them, is in
tests/realmm/test_megatron_components_real.py)."""
from __future__ import annotations

import json

import pytest

from msmigrate.agent.routes.megatron.components import match_components
from msmigrate.tools.megatron.encoder_taps import component_taps, converter_taps, source_taps, taps_diff
from msmigrate.tools.megatron.registry import registered_ids

E, T = 32, 64  # encoder width, text width


def shapes(mergers: int = 2, post_norm: bool = True) -> dict[str, list[int]]:
    out = {"visual.patch.proj.weight": [E, 3, 2, 16, 16], "visual.pos.weight": [16, E],
           "visual.blocks.0.attn.qkv.weight": [3 * E, E], "visual.blocks.0.attn.proj.weight": [E, E],
           "visual.blocks.0.mlp.linear_fc1.weight": [2 * E, E], "visual.blocks.0.mlp.linear_fc2.weight": [E, 2 * E],
           "visual.blocks.0.norm1.weight": [E], "visual.blocks.0.norm1.bias": [E],
           "visual.head.norm.weight": [E], "visual.head.norm.bias": [E], "visual.head.fc1.weight": [4 * E, 4 * E],
           "visual.head.fc1.bias": [4 * E], "visual.head.fc2.weight": [T, 4 * E], "visual.head.fc2.bias": [T],
           "lm.layers.0.self_attn.q_proj.weight": [T, T], "lm.layers.0.self_attn.k_proj.weight": [T // 2, T],
           "lm.layers.0.self_attn.v_proj.weight": [T // 2, T], "lm.layers.0.self_attn.o_proj.weight": [T, T],
           "lm.layers.0.mlp.gate_proj.weight": [2 * T, T], "lm.layers.0.mlp.up_proj.weight": [2 * T, T],
           "lm.layers.0.mlp.down_proj.weight": [T, 2 * T], "lm.embed.weight": [512, T]}
    for i in range(mergers):
        w = 4 * E if post_norm else E
        out |= {f"visual.taps.{i}.norm.weight": [w], f"visual.taps.{i}.norm.bias": [w],
                f"visual.taps.{i}.fc1.weight": [4 * E, 4 * E], f"visual.taps.{i}.fc2.weight": [T, 4 * E]}
    return out


CFG = {"model_type": "tapvlm",
       "vision_config": {"depth": 4, "hidden_size": E, "num_heads": 2, "tap_layers": [1, 3], "patch_size": 16},
       "text_config": {"hidden_size": T, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 512}}

# an encoder layer that builds a registered projector class on the layers a config list names, as the real
# Qwen3VLVisionTransformerLayer does (our own code; the projector's norm is over the merged rows when asked)
LAYER = '''
from mindspeed_mm.models.vision.projectors.multimodal_projector import MultimodalProjector
from mindspeed_mm.models.vision.projectors.post_norm_mlp import PostNormMLP


class TapLayer:
    def __init__(self, config, submodules, layer_number=1):
        taps = config.tap_layers
        if layer_number - 1 in taps:
            self.merger = {cls}(config=config.projector_config, submodules=submodules, use_postshuffle_norm=True)
        else:
            self.merger = None


def get_tap_layer_spec(config, is_vit=True, *args, **kwargs):
    return ModuleSpec(module=TapLayer, submodules=None)
'''
POST_NORM = '''
import torch


class PostNormMLP:
    def __init__(self, config, submodules, use_postshuffle_norm=False):
        self.layernorm = torch.nn.LayerNorm(config.ffn_hidden_size if use_postshuffle_norm else config.input_size)
        self.fc1 = torch.nn.Linear(config.ffn_hidden_size, config.ffn_hidden_size)
        self.fc2 = torch.nn.Linear(config.ffn_hidden_size, config.hidden_size)

    def forward(self, x):
        return self.fc2(self.fc1(self.layernorm(x)))
'''


@pytest.fixture
def standin(tmp_path):
    from msmigrate.testbeds.megatron_standin import write_megatron_standin

    return write_megatron_standin(tmp_path / "mm", git_init=False, with_assets=False)


def add_tap_encoder(root, projector_class: str):
    models = root / "mindspeed_mm/models"
    (models / "vision/projectors/post_norm_mlp.py").write_text(POST_NORM)
    (models / "vision/vision_encoders/tap_vit.py").write_text(LAYER.replace("{cls}", projector_class))
    spec = models / "common/module_spec/get_layer_spec.py"
    spec.write_text("from mindspeed_mm.models.vision.vision_encoders.tap_vit import get_tap_layer_spec\n"
                    + spec.read_text().replace("vit_layer_specs = {", "vit_layer_specs = {'tapvit': get_tap_layer_spec, "))
    vm = models / "vision/vision_model.py"
    vm.write_text(vm.read_text().replace("VISION_PROJECTION_MAPPINGS = {", 'VISION_PROJECTION_MAPPINGS = {\n    "postmlp": '
                                         "PostNormMLP,").replace(
        "import torch\n", "import torch\nfrom .projectors.post_norm_mlp import PostNormMLP\n", 1))


def test_source_mergers_found_by_structure_and_their_layers_by_length():
    got = source_taps(CFG, shapes())
    assert got.list == "visual.taps" and got.count == 2
    assert (got.index_field, got.indexes) == ("tap_layers", [1, 3])
    assert got.structure["matrices"] == 2 and got.structure["norm_at_input"] is True
    # the projector after the tower (visual.head) is a plain module, and the tower / LM layers form no chain
    assert source_taps(CFG, {k: v for k, v in shapes().items() if ".taps." not in k}) is None
    two = json.loads(json.dumps(CFG))
    two["vision_config"]["other_list"] = [0, 2]
    assert "which tower layers feed them is not known" in source_taps(two, shapes()).error


def test_the_encoder_layer_that_builds_them_fits_and_one_that_does_not_is_named(standin):
    add_tap_encoder(standin, "PostNormMLP")
    src = source_taps(CFG, shapes())
    comp = component_taps(standin, "tapvit", "postmlp")
    assert (comp.layer_class, comp.attr, comp.index_field) == ("TapLayer", "merger", "tap_layers")
    assert comp.init_args == {"use_postshuffle_norm": True}
    assert taps_diff(src, comp) == []
    assert converter_taps(src, comp) == {"hf_list": "visual.taps", "index_field": "tap_layers", "attr": "merger"}
    # the norm over the encoder's rows instead of the merged ones is a different merger
    assert taps_diff(source_taps(CFG, shapes(post_norm=False)), comp) == [
        "per-layer merger norm_at_input: source False, component True"]
    assert taps_diff(src, component_taps(standin, "qwen2vit", "lnmlp")) == [
        "per-layer mergers: source 2 (visual.taps), component qwen2vit builds none"]


def test_a_tap_built_by_a_class_that_ignores_the_post_shuffle_flag_does_not_fit(standin):
    """The stand-in's MultimodalProjector takes use_postshuffle_norm but normalises the encoder's width anyway."""
    add_tap_encoder(standin, "MultimodalProjector")
    diff = taps_diff(source_taps(CFG, shapes()), component_taps(standin, "tapvit", "lnmlp"))
    assert diff == ["per-layer merger norm_at_input: source True, component False"]


def test_encoder_without_taps_does_not_fit_and_no_new_encoder_drops_them(standin, tmp_path):
    """On the stand-in (no encoder builds per-layer mergers), a Qwen3-VL-shaped source is not given an encoder
    that silently leaves its mergers out: the plan says why, and the model phase stops on it."""
    from msmigrate.agent.routes.megatron.plan import _new_encoder
    from msmigrate.agent.routes.megatron.components import example_components

    m = match_components(CFG, standin, registered_ids(standin), shapes=shapes())
    enc = m["vision_encoder"]
    assert enc.model_id is None and enc.taps["converter"] is None
    assert "component qwen2vit builds none" in " ".join(enc.taps["missing"])
    reasons: list[str] = []
    assert _new_encoder(standin, m, example_components(standin), CFG, shapes(), "tapvlm", reasons) is None
    assert "would silently drop them" in reasons[-1] and "visual.taps" in reasons[-1]
    assert "would silently drop them" in enc.why
