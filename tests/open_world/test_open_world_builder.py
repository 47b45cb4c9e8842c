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


def test_media_token_counts_follow_the_shrunk_tower():
    # a fixed count of media tokens per image is (patches a side / merge factor) squared: it keeps the factor
    vision = PretrainedConfig(hidden_size=1152, num_hidden_layers=4, image_size=448, patch_size=[14, 14])
    top = PretrainedConfig(image_seq_length=256, mm_tokens_per_image=1024, audio_tokens_per_image=188)
    top.vision_config = vision
    report = shrink.shrink_config(top, vocab=512, images=True)
    assert vision.image_size == 14 * shrink.PATCHES_PER_SIDE  # a square patch given as a pair still counts
    assert top.image_seq_length == (shrink.PATCHES_PER_SIDE // 2) ** 2  # 32 patches a side, merged 2x2 -> 16
    assert top.mm_tokens_per_image == shrink.PATCHES_PER_SIDE ** 2  # one token per patch
    assert top.audio_tokens_per_image == 188  # not an image's tokens
    assert report.changes["image_seq_length"] == (256, 16)


def test_processor_settings_follow_the_shrunk_media_token_count():
    from msmigrate.testbeds.open_world.build import _image_tokens_followed

    report = shrink.ShrinkReport()
    report.note("text_config.num_image_tokens", 256, 64)
    assert _image_tokens_followed("image_seq_length", 256, report) == 64
    assert _image_tokens_followed("image_seq_length", 576, report) is None  # another count: not this field's
    assert _image_tokens_followed("patch_size", 256, report) is None
    # a count only the processor holds (no config field) follows the shrunk tower: 24 patches a side, one token each
    report.old_patches_per_side = 24
    assert _image_tokens_followed("num_image_tokens", 576, report) == shrink.PATCHES_PER_SIDE ** 2


def test_tokens_the_processor_makes_itself_or_looks_up_in_the_vocab():
    import types

    source = '''
class P:
    def __init__(self, tokenizer):
        if not hasattr(tokenizer, "image_token"):
            self.image_token = AddedToken("<image>", special=True)
        else:
            self.image_token = tokenizer.image_token
        self.speaker_id = tokenizer.vocab["|SPEAKER|"]
        self.nl = tokenizer.convert_tokens_to_ids("|NEWLINE|")
'''
    module = types.ModuleType("fake_processing")
    exec(compile(source, "fake_processing.py", "exec"), module.__dict__)  # noqa: S102
    import inspect
    from unittest import mock
    with mock.patch.object(inspect, "getsource", return_value=source):
        found = family_tokens(module.P)
    assert "image_token" not in found.named  # the processor adds it as an AddedToken: a str attribute breaks it
    assert {"<image>", "|SPEAKER|", "|NEWLINE|"} <= set(found.extra)


def test_last_candidate_template_writes_no_image_placeholder():
    from msmigrate.testbeds.open_world.chat_style import chat_styles

    tokens = FamilyTokens(named={"image_token": "<|image|>"})
    styles = chat_styles(type("NoShippedTemplate", (), {}), tokens)
    assert "<|image|>" in styles[0].template and "<|image|>" not in styles[-1].template
    assert styles[-1].source.endswith("no image placeholder")


def test_unset_token_fields_are_listed_for_binding():
    from msmigrate.testbeds.open_world.tokens import unset_token_fields

    top = PretrainedConfig(image_token_id=None, pad_token_id=None, num_query_tokens=32)
    top.text_config = PretrainedConfig(video_token_index=None, boi_token_id=5)
    found = {key for _node, key in unset_token_fields(top)}
    assert found == {"image_token_id", "video_token_index"}  # pad is the tokenizer's; a set id is bound elsewhere


def test_a_hybrid_layer_list_keeps_every_kind_of_layer():
    # the first two layers of a hybrid stack are both linear attention: a model whose cache asks its attention layers
    # for mask sizes then has none (seen in the sweep: "the current Cache seem to only contain LinearAttention layers")
    kinds = (["linear_attention"] * 3 + ["full_attention"]) * 8
    cfg = PretrainedConfig(hidden_size=512, num_attention_heads=4, num_hidden_layers=32, layer_types=kinds)
    shrink.shrink_config(cfg, vocab=512)
    assert cfg.layer_types == ["linear_attention", "full_attention"]
    plain = PretrainedConfig(hidden_size=512, num_attention_heads=4, num_hidden_layers=32,
                             layer_types=["full_attention"] * 32)
    shrink.shrink_config(plain, vocab=512)
    assert plain.layer_types == ["full_attention"] * 2


def test_a_stack_of_more_kinds_than_two_layers_keeps_a_layer_of_each():
    # LFM-style text stack (conv, full and sliding attention): the 2-layer cut kept two conv layers, so the sweep's
    # lfm3_vl went green without one attention layer in its language model ever built or checked
    kinds = ["conv", "conv", "full_attention", "conv", "sliding_attention", "conv"] * 4
    cfg = PretrainedConfig(hidden_size=512, num_attention_heads=4, num_hidden_layers=24, layer_types=kinds)
    shrink.shrink_config(cfg, vocab=512)
    assert cfg.num_hidden_layers == 3 and len(cfg.layer_types) == 3, cfg.layer_types
    assert set(cfg.layer_types) == {"conv", "full_attention", "sliding_attention"}, cfg.layer_types


def test_a_variant_without_its_own_image_processor_takes_its_processors_family():
    from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING_NAMES
    from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor

    from msmigrate.testbeds.open_world.build import _processor_family

    assert _processor_family("not_a_family_moe", Qwen3VLProcessor, IMAGE_PROCESSOR_MAPPING_NAMES) == "qwen3_vl"
    assert _processor_family("qwen2_vl", Qwen3VLProcessor, IMAGE_PROCESSOR_MAPPING_NAMES) == "qwen2_vl"


def test_a_processor_that_expands_its_placeholder_into_patch_tokens_builds(tmp_path):
    """aya_vision's processor writes ``<|IMG_PATCH|>`` tokens for an ``<image>`` placeholder: the config is bound
    to the id the processor is measured writing most for one image; its tile geometry (``patch_size``,
    ``downsample_factor``, ``img_size``) is the model config's. Before, the config was bound to the placeholder by
    name (0 image tokens found) and the processor kept the full-size geometry (2197 tokens for 208 features)."""
    from msmigrate.testbeds.open_world.build import build_family

    result = build_family("aya_vision", tmp_path / "aya")
    assert result.ok, result.reason
    assert result.details["token_fields"]["image_token_index"] == "<|IMG_PATCH|>"
    proc = json.loads((tmp_path / "aya" / "processor_config.json").read_text())
    cfg = json.loads((tmp_path / "aya" / "config.json").read_text())
    assert proc["img_size"] == cfg["vision_config"]["image_size"]
    # saved as one number: the tower's patch times the pixel-shuffle factor
    assert proc["patch_size"] == cfg["vision_config"]["patch_size"] * cfg["downsample_factor"]


def test_a_processor_count_no_config_field_holds_follows_the_towers_own_patches():
    """llava_onevision's processor takes ``num_image_tokens`` (default None) that only its saved config states; at
    the family's own image sizes (the shrunk ones break its any-resolution grid) it is one token per patch of the
    tower, ``(image_size // patch_size) ** 2``; before, it stayed None and the processor could not count tokens.
    (Its build needs torchvision for the video processor: the sweep's runtime builds it, see open_world_sweep.md.)"""
    from transformers import LlavaOnevisionConfig

    from msmigrate.testbeds.open_world.build import _tower_patches

    cfg = LlavaOnevisionConfig()
    assert _tower_patches(cfg, shrink.ShrinkReport()) == cfg.vision_config.image_size // cfg.vision_config.patch_size
    shrunk = shrink.ShrinkReport(old_patches_per_side=27.4)
    assert _tower_patches(cfg, shrunk) == shrink.PATCHES_PER_SIDE
