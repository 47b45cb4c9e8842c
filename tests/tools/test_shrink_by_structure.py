"""``shrink_config`` (probes/_model_build.py) finds the config fields that index layers by their structure, not by a
list of names, and keeps them valid after the cut.

Before, it patched only ``layer_types`` and ``deepstack_visual_indexes``: a tiny Mllama (vision
``intermediate_layers_indices`` and text ``cross_attention_layers``) cut to 2 layers kept indices past both towers
and its forward raised ``IndexError: tuple index out of range``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"


@pytest.fixture()
def shrink(monkeypatch):
    monkeypatch.syspath_prepend(str(PROBES))
    sys.modules.pop("_model_build", None)
    from _model_build import shrink_config

    return shrink_config


def tiny_mllama():
    from transformers import MllamaConfig

    return MllamaConfig(
        image_token_index=100,
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=6, num_global_layers=1,
                           attention_heads=2, image_size=28, patch_size=14, max_num_tiles=1,
                           intermediate_layers_indices=[2, 5], vision_output_dim=32 * 3,
                           supported_aspect_ratios=[[1, 1]]),
        text_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=6, num_attention_heads=2,
                         num_key_value_heads=1, vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                         cross_attention_layers=[1, 4]))


def test_index_fields_of_a_tower_stay_inside_it_and_the_model_runs(shrink):
    import torch
    from transformers import MllamaForConditionalGeneration

    cfg = shrink(tiny_mllama(), 2)
    assert cfg.vision_config.num_hidden_layers == 2 and cfg.text_config.num_hidden_layers == 2
    assert cfg.vision_config.intermediate_layers_indices == [0, 1]  # distinct indices stay distinct
    assert cfg.text_config.cross_attention_layers == [1]  # 1 is still valid and kept; 4 lands on it
    torch.manual_seed(0)
    model = MllamaForConditionalGeneration(cfg).eval()
    ids = torch.tensor([[1, 100, 5, 6, 7]])
    out = model(input_ids=ids, pixel_values=torch.randn(1, 1, 1, 3, 28, 28), aspect_ratio_ids=torch.tensor([[1]]),
                aspect_ratio_mask=torch.ones(1, 1, 1, dtype=torch.long),
                cross_attention_mask=torch.ones(1, 5, 1, 1, dtype=torch.long), labels=ids)
    assert torch.isfinite(out.loss)


def test_per_layer_lists_sibling_indices_and_negative_indices(shrink):
    from transformers import AutoConfig

    # per-layer lists of any element type are cut with their count (Gemma-3n's per-layer intermediate sizes)
    gemma = shrink(AutoConfig.for_model("gemma3n"), 2).text_config
    assert len(gemma.intermediate_size) == 2 and len(gemma.layer_types) == 2
    assert len(gemma.activation_sparsity_pattern) == 2
    # an adapter config with no tower of its own indexes a sibling's (Molmo2's vision_feature_layer)
    molmo = shrink(AutoConfig.for_model("molmo2"), 2)
    assert all(0 <= i < 2 for i in molmo.adapter_config.vision_feature_layer)
    # a negative index past the cut tower is moved inside it, one still inside is left alone
    llava = AutoConfig.for_model("llava", vision_config={"model_type": "clip_vision_model", "num_hidden_layers": 12},
                                 vision_feature_layer=-9)
    assert shrink(llava, 2).vision_feature_layer in (-1, -2, -3)
    llava = AutoConfig.for_model("llava", vision_config={"model_type": "clip_vision_model", "num_hidden_layers": 12},
                                 vision_feature_layer=-2)
    assert shrink(llava, 2).vision_feature_layer == -2
    # sizes are not indices: a list whose values exceed every count is left alone
    qwen = shrink(AutoConfig.for_model("qwen2_5_vl"), 2)
    assert qwen.vision_config.fullatt_block_indexes == type(qwen.vision_config.fullatt_block_indexes)([0, 1])
    assert qwen.vision_config.hidden_size > 2


GEMMA4_TEXT = dict(vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=12, num_attention_heads=2,
                   num_key_value_heads=1, head_dim=8, global_head_dim=16, hidden_size_per_layer_input=0,
                   vocab_size_per_layer_input=64, sliding_window=8, pad_token_id=0)


def _layer_shapes(layer):
    return {name: tuple(p.shape) for name, p in layer.named_parameters()}


def test_a_heterogeneous_stack_keeps_one_layer_of_each_kind_with_its_overrides(shrink, tmp_path):
    """Gemma-4's full-attention layers (every sixth) carry a wider head in ``per_layer_config``. Cut to 2 layers,
    the stack is its layer 0 (sliding) and layer 5 (full), the override moves to layer 1, and the shrunk config
    saves, reloads and builds with each layer shaped as the full model's layer of its kind. Before, the overrides
    stayed at layers 5, 11: the reload raised, and the last layer (forced to full attention) had the narrow head."""
    import copy

    import torch
    from transformers import AutoConfig, Gemma4Config, Gemma4ForCausalLM, Gemma4TextConfig

    full_cfg = Gemma4TextConfig(**GEMMA4_TEXT)
    assert sorted(full_cfg._heterogeneity_spec.per_layer_overrides) == [5, 11]
    torch.manual_seed(0)
    full = Gemma4ForCausalLM(full_cfg)
    cfg = shrink(copy.deepcopy(full_cfg), 2)
    assert cfg._msmigrate_kept == {"num_hidden_layers": [0, 5]}
    cfg.save_pretrained(tmp_path)
    reloaded = AutoConfig.from_pretrained(tmp_path)
    assert reloaded.num_hidden_layers == 2 and reloaded.layer_types == ["sliding_attention", "full_attention"]
    assert reloaded._heterogeneity_spec.per_layer_overrides == {1: {"head_dim": 16}}
    model = Gemma4ForCausalLM(reloaded)
    for new, old in enumerate([0, 5]):
        assert _layer_shapes(model.model.layers[new]) == _layer_shapes(full.model.layers[old])
    assert _layer_shapes(model.model.layers[0]) != _layer_shapes(model.model.layers[1])  # both kinds are built
    ids = torch.tensor([[1, 5, 6, 7, 8, 9]])
    assert torch.isfinite(model(input_ids=ids, labels=ids).loss)
    # the same cut inside a multimodal config (its text_config), and a cut to 1 layer still keeps both kinds
    nested = shrink(Gemma4Config(text_config=dict(GEMMA4_TEXT)), 1)
    assert nested._msmigrate_kept == {"text_config.num_hidden_layers": [0, 5]}
    assert nested.text_config.num_hidden_layers == 2 and nested.text_config.layer_types[-1] == "full_attention"


def test_the_checkpoint_cut_reads_the_kept_layers_tensors(shrink, tmp_path):
    """The real-weights cut (training_parity): the checkpoint's first layers up to the last kept one are loaded
    (``span=True``) and each kept layer takes its own old layer's tensors — layer 1 of the cut model is the
    checkpoint's layer 5, never its layer 1 (which a load by name would give it)."""
    import copy

    import torch
    from _model_build import kept_state
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig

    full_cfg = Gemma4TextConfig(**GEMMA4_TEXT)
    torch.manual_seed(0)
    Gemma4ForCausalLM(full_cfg).save_pretrained(tmp_path)
    full = Gemma4ForCausalLM.from_pretrained(tmp_path)
    span_cfg = shrink(copy.deepcopy(full_cfg), 2, span=True)
    assert span_cfg.num_hidden_layers == 6 and span_cfg._heterogeneity_spec.per_layer_overrides == {5: {"head_dim": 16}}
    span = Gemma4ForCausalLM.from_pretrained(tmp_path, config=span_cfg)
    cut_cfg = shrink(copy.deepcopy(full_cfg), 2)
    cut = Gemma4ForCausalLM(cut_cfg)
    cut.load_state_dict(kept_state(span.state_dict(), cut, cut_cfg._msmigrate_kept), strict=True)
    for new, old in enumerate([0, 5]):
        want = dict(full.model.layers[old].named_parameters())
        for name, p in cut.model.layers[new].named_parameters():
            assert torch.equal(p, want[name]), (new, old, name)
    # a homogeneous stack's cut is its prefix: the state is taken by name
    homogeneous = Gemma4TextConfig(**{**GEMMA4_TEXT, "layer_types": ["full_attention"] * 12})
    plain = shrink(copy.deepcopy(homogeneous), 2)
    assert plain._msmigrate_kept == {"num_hidden_layers": [0, 1]}
    assert shrink(copy.deepcopy(homogeneous), 2, span=True).num_hidden_layers == 2
