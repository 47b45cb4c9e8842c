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


def test_a_rotary_section_the_code_defaults_to_is_written_rescaled_to_the_rotary_half():
    """glm4v's rotary code falls back to ``mrope_section`` [8, 12, 12] (written for a half-rotary 128 head dim)
    when the config states none, and its default config states no partial factor: the 64 frequencies the code
    computes are split by a list summing to 32, and the split fails. The builder reads the rotary module
    (``inv_freq`` and a ``*section*`` list), finds it failing, and writes the section into the config's rope dict,
    split as the default splits it. A module whose code slices by the sections (tolerating the longer list, as
    qwen3_5's interleaved layout does) is left as the family wrote it."""
    import torch

    from msmigrate.testbeds.open_world.fit import fit_rotary_sections

    class Rotary(torch.nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.register_buffer("inv_freq", torch.ones(64), persistent=False)
            self.mrope_section = config.rope_parameters.get("mrope_section", [8, 12, 12])

        def forward(self, x, position_ids):
            freqs = position_ids[..., None].float() * self.inv_freq
            return torch.cat(freqs.split(self.mrope_section, dim=-1), dim=-1)

    class SlicingRotary(Rotary):
        def forward(self, x, position_ids):
            freqs = position_ids[..., None].float() * self.inv_freq
            return freqs[..., :sum(self.mrope_section)]

    text = PretrainedConfig(hidden_size=256, num_attention_heads=2, rope_parameters={"rope_type": "default"})
    top = PretrainedConfig()
    top.text_config = text
    assert fit_rotary_sections(torch.nn.Sequential(SlicingRotary(PretrainedConfig(**text.to_dict()))), top) == {}
    model = torch.nn.Sequential(Rotary(PretrainedConfig(**text.to_dict())))
    fitted = fit_rotary_sections(model, top)
    assert fitted == {"text_config.rope_parameters.mrope_section": ([8, 12, 12], [16, 24, 24])}
    assert text.rope_parameters == {"rope_type": "default", "mrope_section": [16, 24, 24]}
    assert Rotary(text).mrope_section == [16, 24, 24]
    Rotary(text)(None, torch.arange(4)[None])  # the fitted section splits the frequencies
    # a section the config states, or one that already fits, is left alone
    assert fit_rotary_sections(torch.nn.Sequential(Rotary(text)), top) == {}


def test_a_tower_of_fewer_patches_than_the_tiny_count_grows_to_it():
    """idefics3's default tower is 7 patches of 32 at 224 pixels, which its pixel shuffle (a factor of 2) cannot
    divide: the shrink sets every fixed-size tower to PATCHES_PER_SIDE patches a side, growing ones below it."""
    vision = PretrainedConfig(hidden_size=1152, num_hidden_layers=4, num_attention_heads=16, image_size=224,
                              patch_size=32)
    top = PretrainedConfig(scale_factor=2)
    top.vision_config = vision
    report = shrink.shrink_config(top, vocab=512, images=True)
    assert vision.image_size == shrink.PATCHES_PER_SIDE * 32
    assert report.old_patches_per_side == 7


def test_a_processor_that_cuts_fixed_tiles_gets_tiles_of_the_towers_input_size():
    """Idefics3's image processor resizes to a longest edge of 1456 and cuts tiles of 364 (its ``max_image_size``),
    each fed to the tower whole: both sizes scale so the tiles, measured, are the tower's input size. A processor
    whose pixels follow the image (no fixed tile) is left alone."""
    from PIL import Image
    from transformers.models.auto.image_processing_auto import get_image_processor_class_from_name

    from msmigrate.testbeds.open_world.fit import fit_tiles

    tiles = get_image_processor_class_from_name("Idefics3ImageProcessorPil")()
    assert fit_tiles(tiles, 256) == {"size.longest_edge": (1456, 1024), "max_image_size.longest_edge": (364, 256)}
    pixels = tiles(images=[Image.new("RGB", (90, 70))], return_tensors="pt")["pixel_values"]
    assert tuple(pixels.shape[-2:]) == (256, 256)
    free = get_image_processor_class_from_name("PixtralImageProcessorPil")()
    assert fit_tiles(free, 256) == {} and free.size["longest_edge"] == 1024


def test_the_media_count_per_tile_follows_the_models_features_for_the_processors_pixels():
    """A processor that writes ``image_seq_len`` media tokens per tile (169, for its family's real tower) and a
    tiny model that gives 16 features per tile: the count becomes 16, measured from both."""
    import torch

    from msmigrate.testbeds.open_world.fit import fit_media_count

    class Processor:
        image_token = "<image>"

        def __init__(self):
            self.image_seq_len = 169

        def __call__(self, text, images, return_tensors):
            ids = [1] + [7] * (self.image_seq_len * 13) + [2]
            return {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids)),
                    "pixel_values": torch.zeros(1, 13, 3, 8, 8)}

    class Model(torch.nn.Module):
        def get_image_features(self, pixel_values):
            return [torch.zeros(pixel_values.shape[1] * 16, 4)]

    processor = Processor()
    assert fit_media_count(processor, Model(), 7) == {"image_seq_len": (169, 16)}
    assert processor.image_seq_len == 16
    assert fit_media_count(processor, Model(), 7) == {}  # agreeing counts stay


def test_a_tiling_family_whose_default_tower_and_processor_disagree_builds(tmp_path):
    """idefics3 (pixel shuffle 2; processor tiles of 364 and 169 tokens a tile, default tower 7 patches of 32):
    before, the verify failed reshaping 11 patches a side by 2; now tower, tiles and token count agree."""
    from msmigrate.testbeds.open_world.build import build_family

    result = build_family("idefics3", tmp_path / "idefics3")
    assert result.ok, result.reason
    assert result.details["tiles_fitted"]["max_image_size.longest_edge"] == [364, 256]
    assert result.details["media_count_fitted"] == {"image_seq_len": [169, 16]}
    proc = json.loads((tmp_path / "idefics3" / "processor_config.json").read_text())
    assert proc["image_seq_len"] == 16


def test_per_layer_overrides_are_shrunk_per_layer_and_follow_their_layers():
    """A heterogeneous config (gemma4's text stack: every sixth layer a full-attention one with a 512 head dim in
    ``per_layer_config``) raises on a global read of a per-layer field; the shrink reads the global fields with the
    overrides set aside, shrinks each kept layer's own config by the same rules, and moves its overrides to the
    shrunk layer that stands for it (the one of its layer kind)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if "gemma4" not in CONFIG_MAPPING:
        pytest.skip("this transformers has no heterogeneous image-text family")
    text = CONFIG_MAPPING["gemma4"]().text_config
    assert text.is_heterogeneous and text.per_layer_attributes == {"head_dim"}
    top = PretrainedConfig()
    top.text_config = text
    report = shrink.shrink_config(top, vocab=512)
    assert text.num_hidden_layers == 2 and text.layer_types == ["sliding_attention", "full_attention"]
    assert text._heterogeneity_spec.per_layer_overrides == {1: {"head_dim": 512}}
    assert text.per_layer_config[1].head_dim == 512 and text.per_layer_config[0].head_dim == 256
    assert "text_config.per_layer_config" in report.changes


def test_per_layer_head_counts_are_capped_on_the_layers_own_config():
    """An override of a count (a layer's own head counts, as dots3_note's text stack has) is shrunk on that layer's
    config: capped like the global one, the key-value heads following the layer's own attention heads (grouped
    there, not in the global config)."""
    cfg = PretrainedConfig(hidden_size=4096, num_hidden_layers=8, num_attention_heads=32, num_key_value_heads=32,
                           layer_types=["full_attention", "sliding_attention"] * 4,
                           per_layer_config={1: {"num_attention_heads": 64, "num_key_value_heads": 8},
                                             3: {"num_attention_heads": 64, "num_key_value_heads": 8}})
    shrink.shrink_config(cfg, vocab=512)
    assert cfg.num_hidden_layers == 2
    # layer 1 is kept: its heads shrink to the global tiny count (an override transformers then drops as equal),
    # its grouped key-value heads to one
    assert cfg._heterogeneity_spec.per_layer_overrides == {1: {"num_key_value_heads": 1}}
    assert (cfg.per_layer_config[0].num_key_value_heads, cfg.per_layer_config[1].num_attention_heads) == \
        (shrink.HEADS, shrink.HEADS)


def test_tokens_a_processor_reads_from_the_tokenizer_without_a_fallback_are_named():
    """gemma4's processor reads ``getattr(tokenizer, "boa_token", None)`` (and ``eoa_token``, ``audio_token``) and
    refuses every call where one is missing: a checkpoint's tokenizer names them, so the tiny one does too."""
    from transformers.models.gemma4.processing_gemma4 import Gemma4Processor

    named = family_tokens(Gemma4Processor).named
    assert {"boa_token", "eoa_token", "audio_token"} <= set(named)
    assert named["boa_token"] == fresh_token("boa_token_id")  # the token the config's boa_token_id is bound to


def test_a_vision_sub_config_the_default_leaves_unset_is_made_from_its_class():
    """gemma4's default config declares its vision tower optional and leaves it None (the model then has no image
    path); the builder makes it from the class the config declares. A config with its towers set is untouched."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from msmigrate.testbeds.open_world.build import _make_vision_config

    cfg = CONFIG_MAPPING["gemma4"]()
    assert cfg.vision_config is None
    assert _make_vision_config(cfg) == ["vision_config"]
    assert type(cfg.vision_config).__name__ == "Gemma4VisionConfig" and cfg.audio_config is None
    llava = CONFIG_MAPPING["llava"]()
    assert _make_vision_config(llava) == []


def test_adapter_and_projection_widths_are_widths():
    """An adapter's input and output widths (``adapter_in_dim`` / ``adapter_input_size`` must equal its tower's
    hidden size and ``adapter_out_dim`` the text's: dots3_note's config validates both) and a projection's
    (``output_proj_dims``) shrink with the other widths."""
    cfg = PretrainedConfig(hidden_size=5120, num_hidden_layers=4, num_attention_heads=8)
    vision = PretrainedConfig(hidden_size=1536, adapter_out_dim=5120, output_proj_dims=3840, adapter_in_dim=1536,
                              adapter_input_size=1280, num_hidden_layers=4)
    cfg.vision_config = vision
    shrink.shrink_config(cfg, vocab=512)
    assert vision.adapter_out_dim == vision.output_proj_dims == cfg.hidden_size == shrink.HIDDEN
    assert vision.adapter_in_dim == vision.adapter_input_size == vision.hidden_size == shrink.HIDDEN


def test_a_per_layer_input_vocabulary_shrinks_with_the_vocabulary():
    """gemma4's per-layer input embeddings (``vocab_size_per_layer_input`` 262144 rows a layer) are indexed by token
    id like the main table: left unshrunk they made a 143M-parameter "tiny" source."""
    cfg = PretrainedConfig(hidden_size=2304, num_hidden_layers=4, num_attention_heads=8, vocab_size=262144,
                           vocab_size_per_layer_input=262144, hidden_size_per_layer_input=256)
    shrink.shrink_config(cfg, vocab=512)
    assert cfg.vocab_size == cfg.vocab_size_per_layer_input == 512
