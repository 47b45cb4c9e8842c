"""The media expansion is measured by each source's own processor (probes/media_expansion.py in the runtime), one
test per kind of expansion the probe tells apart; and the data contract built from it names every processor
output's fate. The expected figures are read off each family's processor docs, not off the probe."""

from __future__ import annotations

import sys

import pytest

from msmigrate.agent.routes.fsdp2.data_contract import architecture_kind, derive_contract
from msmigrate.tools.media_expansion import MediaExpansion, derive_media_expansion


@pytest.fixture(scope="module")
def measure(tmp_path_factory):
    from msmigrate.testbeds.fixtures import build_source

    root = tmp_path_factory.mktemp("media_expansion")
    cache: dict[str, MediaExpansion] = {}

    def get(name: str) -> MediaExpansion:
        if name not in cache:
            folder = build_source(name, root / name)
            cache[name] = derive_media_expansion(sys.executable, folder, folder / "data" / "train.json",
                                                 run_dir=root / f"run_{name}")
            assert cache[name].ok, cache[name].error
        return cache[name]

    return get


def test_fixed_count_from_the_processor(measure):
    exp = measure("llava")  # CLIP 28/7 -> 16 patch features, CLS dropped; the template's "<image>\n" keeps its \n
    assert exp.kind == "fixed" and exp.counts == [16] * len(exp.per_image)
    assert exp.placeholder == "<image>\n" and exp.media_token == "<image>"
    assert exp.fixed_text == "<image>" * 16 + "\n"
    assert exp.media_token_source.startswith("config.json:image_token_index")
    assert {p.num_multimodal_tokens for p in exp.per_image} == {16}  # the processor's own count agrees


def test_size_dependent_count_from_tiling(measure):
    exp = measure("llava_next")  # anyres: the crop grid (and so the count) follows the aspect ratio
    assert exp.kind == "per_image" and exp.fixed_text is None
    by_size = {tuple(p.size): p.count for p in exp.per_image}
    assert by_size[(64, 48)] == 24 and len(set(by_size.values())) > 1
    assert "image_sizes" in exp.image_processor_keys and "image_sizes" in exp.model_input_names
    assert all(p.num_multimodal_tokens == p.count for p in exp.per_image)


def test_start_end_and_tile_tokens_around_the_media_run(measure):
    exp = measure("aya_vision")  # <|START_OF_IMG|> TILE_GLOBAL <|IMG_PATCH|>*4 <|END_OF_IMG|>; wide -> more tiles
    one = exp.per_image[0]
    assert one.prefix == ["<|START_OF_IMG|>", "TILE_GLOBAL"] and one.suffix == ["<|END_OF_IMG|>"] and one.count == 4
    wide = next(p for p in exp.per_image if p.image == "stretched wide")
    assert wide.count > one.count and "TILE_GLOBAL" in wide.break_tokens  # tiles, then the global view
    assert exp.media_token == "<|IMG_PATCH|>"  # not the template's <image>: the id the features go into


def test_processor_adds_ids_around_the_expansion_and_marks_the_suffix(measure):
    exp = measure("paligemma")  # <image>*4 then <bos> + prompt + "\n": two ids after the expansion
    assert (exp.pre, exp.post) == (0, 2) and exp.fixed_text == "<image>" * 4
    assert exp.token_type_ids == "suffix" and "labels" in exp.keys_with_image
    # of the two, <bos> sits between the LAST image run and the prompt (once, not per image); "\n" ends the text
    assert exp.after_media_once == {"ids": [exp.after_media_once["ids"][0]], "text": "<bos>", "where": "last"}


def test_nothing_once_after_the_media_where_the_processor_adds_it_per_image_or_not_at_all(measure):
    assert measure("llava").after_media_once is None  # its "\n" is the template's, inside the placeholder
    assert measure("aya_vision").after_media_once is None  # <|END_OF_IMG|> closes every image: in the expansion


def test_token_type_ids_on_media_tokens(measure):
    exp = measure("gemma3")  # "\n\n<start_of_image>" + soft tokens + "<end_of_image>\n\n"; tt = 1 on soft tokens
    assert exp.token_type_ids == "media" and exp.per_image[0].prefix[-1] == "<start_of_image>"
    contract = derive_contract(exp, {"input_ids", "pixel_values", "token_type_ids", "labels", "attention_mask"})
    assert contract.mm_input_keys == ["pixel_values"] and contract.collator_derives == {"token_type_ids": "media"}
    assert contract.collator_drops == ["mm_token_type_ids"] and contract.needs_collator


def test_grid_count_through_a_processor_composed_without_video(measure):
    exp = measure("qwen2_vl")  # needs torchvision for its video processor: composed from tokenizer + image proc
    assert "composed" in exp.loaded_via or exp.loaded_via == "AutoProcessor"
    assert exp.kind == "per_image" and exp.per_image[0].count == 4  # 4x4 patches merged 2x2
    assert exp.per_image[0].prefix == ["<|vision_start|>"] and exp.per_image[0].suffix == ["<|vision_end|>"]


def test_contract_names_every_dropped_output_with_a_reason(measure):
    exp = measure("aya_vision")  # its image processor also returns num_patches; the forward has no such parameter
    contract = derive_contract(exp, {"input_ids", "pixel_values", "attention_mask", "labels", "image_sizes"})
    assert contract.mm_input_keys == ["pixel_values"]
    assert {"key": "num_patches", "reason": "the forward has no such parameter"} in contract.dropped
    pal = derive_contract(measure("paligemma"), {"input_ids", "pixel_values", "token_type_ids", "labels"})
    assert pal.collator_derives == {"token_type_ids": "suffix"}
    assert any(d["key"] == "labels" and "builds labels" in d["reason"] for d in pal.dropped)


def test_result_round_trips_through_the_plan(measure):
    exp = measure("llava_next")
    again = MediaExpansion.from_dict(exp.to_dict())
    assert again == exp and "depends on the image" in again.describe()


def test_a_probe_failure_is_a_result():
    exp = derive_media_expansion(sys.executable, __import__("pathlib").Path("/nonexistent"), __import__(
        "pathlib").Path("/nonexistent/train.json"))
    assert not exp.ok and exp.error


@pytest.mark.parametrize("cfg,kind", [
    ({"text_config": {"is_encoder_decoder": True}, "vision_config": {}}, "encoder-decoder"),
    ({"vq_config": {}, "vocabulary_map": {"IMGIMGAZ": 5}}, "early-fusion"),
    ({"vq_config": {}, "vision_config": {}}, "decoder"),  # a VQ head for generation next to a vision encoder
    ({"text_config": {"model_type": "llama"}, "vision_config": {}}, "decoder"),
])
def test_architecture_kind_from_config(cfg, kind):
    assert architecture_kind(cfg)[0] == kind


def test_suffix_rule_reaches_the_collator_when_only_a_suffix_call_returns_the_key():
    # transformers 4.57's PaliGemmaProcessor returns token_type_ids only when given a suffix (seen in the real
    # runtime): the rule the probe measured still decides, the key need not be in the plain call's outputs
    exp = MediaExpansion(ok=True, image_processor_keys=["pixel_values"],
                         keys_with_image=["attention_mask", "input_ids", "pixel_values"], token_type_ids="suffix")
    contract = derive_contract(exp, {"input_ids", "pixel_values", "token_type_ids", "labels", "attention_mask"})
    assert contract.collator_derives == {"token_type_ids": "suffix"} and contract.mm_input_keys == ["pixel_values"]
    assert derive_contract(exp, {"input_ids", "pixel_values"}).dropped == [
        {"key": "token_type_ids", "reason": "the forward has no such parameter"}]


def test_an_output_the_generic_collator_makes_is_not_dropped():
    # transformers 5.x Qwen2-VL processors return mm_token_type_ids and the forward takes it; the target's generic
    # collator makes the same key from the collated ids, so G1 must not test the source without it
    exp = MediaExpansion(ok=True, image_processor_keys=["pixel_values", "image_grid_thw"],
                         keys_with_image=["attention_mask", "input_ids", "mm_token_type_ids", "pixel_values"])
    forward = {"input_ids", "attention_mask", "pixel_values", "image_grid_thw", "mm_token_type_ids", "labels"}
    contract = derive_contract(exp, forward)
    assert contract.collator_makes == ["mm_token_type_ids"] and contract.dropped == []
    assert not contract.needs_collator
    # a forward that does not take it: the key is dropped, and said so
    assert derive_contract(exp, forward - {"mm_token_type_ids"}).dropped == [
        {"key": "mm_token_type_ids", "reason": "the forward has no such parameter"}]


def test_the_error_line_is_the_exception_not_a_later_warning():
    from msmigrate.tools.media_expansion import error_line

    tail = ("Traceback (most recent call last):\n  File \"x.py\", line 3\nValueError: no image placeholder\n"
            "[transformers] `XProcessor` defines `image_processor_class = 'AutoImageProcessor'`, which is deprecated.")
    assert error_line(tail) == "ValueError: no image placeholder"
    assert error_line("[transformers] something is deprecated\n") is None
