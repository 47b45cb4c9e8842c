"""The open-world builder's pieces: the structural shrink, the family tokens read from a processor class, the chat
style chosen from them, and one whole build + verify of a family (processor and model reload, finite loss)."""

from __future__ import annotations

import json

import pytest
from transformers import PretrainedConfig

from msmigrate.testbeds.open_world import shrink
from msmigrate.testbeds.open_world.chat_style import image_placeholders, infer_style
from msmigrate.testbeds.open_world.tokens import FamilyTokens, family_tokens, fresh_token, token_for_field


def _tree() -> PretrainedConfig:
    text = PretrainedConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                            num_attention_heads=32, num_key_value_heads=8, vocab_size=152064,
                            layer_types=["full_attention"] * 32, rope_parameters={"mrope_section": [16, 24, 24]},
                            num_experts=64, num_experts_per_tok=8)
    vision = PretrainedConfig(embed_dim=1280, hidden_size=3584, depth=32, num_heads=16,
                              deepstack_visual_indexes=[8, 16, 24], image_size=448, patch_size=14)
    top = PretrainedConfig(vision_feature_layer=-2, vision_feature_layers=[3, 17, 31], image_token_id=151655)
    top.text_config, top.vision_config = text, vision
    return top


def test_shrink_caps_counts_and_makes_widths_uniform():
    cfg = _tree()
    report = shrink.shrink_config(cfg, vocab=512)
    t, v = cfg.text_config, cfg.vision_config
    assert (t.num_hidden_layers, v.depth) == (shrink.LAYERS, shrink.LAYERS)
    assert (t.num_attention_heads, t.num_key_value_heads, v.num_heads) == (2, 1, 2)
    # two different original widths that a family may require equal end up equal
    assert t.hidden_size == v.hidden_size == v.embed_dim == shrink.HIDDEN
    assert t.intermediate_size == shrink.FFN
    assert t.vocab_size == 512 and (t.num_experts, t.num_experts_per_tok) == (shrink.EXPERTS, 2)
    assert t.layer_types == ["full_attention"] * 2  # one entry per layer: truncated with the layers
    assert "text_config.num_hidden_layers" in report.changes
    # image sizes and token ids are not the shrink's business
    assert v.image_size == 448 and cfg.image_token_id == 151655


def test_shrink_moves_layer_indexes_into_the_shrunk_towers():
    cfg = _tree()
    shrink.shrink_config(cfg, vocab=512)
    assert all(0 <= i < shrink.LAYERS for i in cfg.vision_config.deepstack_visual_indexes)
    assert all(0 <= i < shrink.LAYERS for i in cfg.vision_feature_layers)
    assert cfg.vision_feature_layer == -2  # a negative index counts from the end and still fits two layers


def test_rotary_sections_follow_the_new_head_dim():
    cfg = PretrainedConfig(hidden_size=4096, num_attention_heads=32, num_hidden_layers=4,
                           rope_parameters={"rope_type": "default", "mrope_section": [16, 24, 24]})
    shrink.shrink_config(cfg, vocab=512)
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    assert sum(cfg.rope_parameters["mrope_section"]) == head_dim // 2
    assert cfg.rope_parameters["rope_type"] == "default"


def test_family_tokens_come_from_the_processor_class():
    from transformers import LlavaProcessor, Qwen2VLProcessor

    assert family_tokens(LlavaProcessor).named["image_token"] == "<image>"  # its __init__ default
    qwen = family_tokens(Qwen2VLProcessor)
    assert qwen.named["image_token"] == "<|image_pad|>"  # the literal the module falls back to
    assert token_for_field("image_token_id", qwen.named) == "<|image_pad|>"
    assert token_for_field("image_token_index", {"image_token": "<image>"}) == "<image>"
    assert fresh_token("vision_start_token_id") == "<|vision_start|>"


@pytest.mark.parametrize("extra, style", [
    (["<|im_start|>", "<|im_end|>"], "inferred: ChatML"),
    (["[INST]", "[/INST]"], "inferred: [INST]"),
    (["<start_of_turn>", "<end_of_turn>"], "inferred: turn tokens"),
    ([], "inferred: USER/ASSISTANT"),
])
def test_chat_style_follows_the_family_tokens(extra, style):
    from jinja2 import Environment

    tokens = FamilyTokens(named={"image_token": "<IMG>"}, extra=extra)
    chosen = infer_style(tokens)
    assert chosen.source == style
    text = Environment().from_string(chosen.template).render(
        messages=[{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What?"}]},
                  {"role": "assistant", "content": [{"type": "text", "text": "A square."}]}],
        bos_token="<s>", eos_token="</s>", add_generation_prompt=False)
    assert "<IMG>What?" in text and "A square." in text


def test_image_placeholders_put_the_image_token_first():
    tokens = FamilyTokens(named={"boi_token": "<boi>", "image_token": "<img>", "eos_token": "</s>"})
    assert image_placeholders(tokens) == ["<img>", "<boi>"]
    assert image_placeholders(FamilyTokens()) == ["<image>"]


def test_build_family_writes_a_source_that_loads_and_trains(tmp_path):
    from msmigrate.testbeds.open_world.build import build_family

    result = build_family("llava", tmp_path / "llava")
    assert result.ok, result.reason
    assert result.stage == "done" and result.loss is not None and result.loss > 0
    src = tmp_path / "llava"
    cfg = json.loads((src / "config.json").read_text())
    assert cfg["architectures"] == ["LlavaForConditionalGeneration"]
    assert cfg["text_config"]["num_hidden_layers"] == shrink.LAYERS
    assert (src / "data" / "train.json").is_file() and list((src / "data" / "images").glob("*.png"))
    assert result.details["parameters"] < 5_000_000


def test_build_family_says_why_it_cannot_build(tmp_path):
    from msmigrate.testbeds.open_world.build import build_family

    # a model type transformers maps to no processor class: nothing faithful to build, and the result says so
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

    family = next(m for m in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES if not PROCESSOR_MAPPING_NAMES.get(m))
    result = build_family(family, tmp_path / "x")
    assert not result.ok and result.stage == "classes"
    assert "no processor class" in result.reason
