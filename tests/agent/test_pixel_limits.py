"""The delivered YAML's pixel bounds come from the source's own processor configs (image bounds from the image
processor, video bounds from the video processor), never from the similar example, and never below a sample image
(msmigrate/agent/routes/fsdp2/pixel_limits.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from msmigrate.agent.routes.fsdp2.pixel_limits import derived_pixel_limits, pixel_bounds


@pytest.mark.parametrize("ip, expected", [
    # Qwen2-VL's published processor: explicit pixel bounds (the lower one the processor applies itself)
    ({"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "merge_size": 2}, (12845056, 0)),
    # GLM-4.1V: size as pixel counts for an area resize into patch x merge multiples
    ({"size": {"shortest_edge": 12544, "longest_edge": 9633792}, "patch_size": 14, "merge_size": 2,
      "temporal_patch_size": 2}, (9633792, 0)),
    # InternVL (GotOcr2): up to 12 tiles of 448 x 448, each tile resized by the processor itself
    ({"crop_to_patches": True, "max_patches": 12, "min_patches": 1, "size": {"height": 448, "width": 448}},
     (12 * 448 * 448, 0)),
    # Idefics3 / SmolVLM: the longest edge resized to a side length; no bound of its own
    ({"size": {"longest_edge": 1536}, "max_image_size": {"longest_edge": 384}}, (None, None)),
    # CLIP (LLaVA-1.5): shortest edge 336 then a 336 x 336 crop; every image resized by the processor itself
    ({"size": {"shortest_edge": 336}, "crop_size": {"height": 336, "width": 336}}, (None, None)),
])
def test_bounds_follow_the_processor(ip, expected):
    assert pixel_bounds(ip)[:2] == expected


def test_a_processor_config_without_sizes_derives_nothing():
    assert pixel_bounds({"do_normalize": True}) is None


def test_the_example_bound_is_replaced_and_said(tmp_path: Path):
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"crop_to_patches": True, "max_patches": 12, "size": {"height": 448, "width": 448}}))
    values, why = derived_pixel_limits(tmp_path, {"image_max_pixels": 4096, "image_min_pixels": 1024})
    assert values == {"image_max_pixels": 12 * 448 * 448, "image_min_pixels": 0}
    assert "at most 12 tiles of 448x448" in why and "4096" in why


def test_processor_config_json_is_read_where_no_preprocessor_config(tmp_path: Path):
    (tmp_path / "processor_config.json").write_text(json.dumps(
        {"image_processor": {"min_pixels": 784, "max_pixels": 1003520}, "processor_class": "X"}))
    assert derived_pixel_limits(tmp_path, {})[0] == {"image_max_pixels": 1003520, "image_min_pixels": 0}


def test_a_fixed_resize_removes_the_example_bounds(tmp_path: Path):
    """No bound below an image's size is neutral for a processor that resizes every image itself (two resamplings):
    the example's keys go, the framework's defaults apply."""
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"size": {"shortest_edge": 336}, "crop_size": {"height": 336, "width": 336}}))
    values, why = derived_pixel_limits(tmp_path, {"image_max_pixels": 4096, "image_min_pixels": 1024})
    assert values == {"image_max_pixels": None, "image_min_pixels": None}
    assert "left to the framework" in why and "4096" in why


def test_nothing_to_derive_keeps_the_example_and_says_so(tmp_path: Path):
    values, why = derived_pixel_limits(tmp_path, {"image_max_pixels": 4096})
    assert values == {} and "states no resolution" in why and "4096" in why


def test_video_bounds_come_from_the_video_processor_file(tmp_path: Path):
    """A checkpoint saved with its own video processor file: the video bounds are that file's, not the image's."""
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"size": {"shortest_edge": 65536, "longest_edge": 16777216}, "patch_size": 16, "merge_size": 2,
         "temporal_patch_size": 2}))
    (tmp_path / "video_preprocessor_config.json").write_text(json.dumps(
        {"size": {"shortest_edge": 4096, "longest_edge": 25165824}, "patch_size": 16, "merge_size": 2,
         "temporal_patch_size": 2}))
    values, why = derived_pixel_limits(tmp_path, {"video_max_pixels": 65536, "video_min_pixels": 256})
    assert values == {"image_max_pixels": 16777216, "image_min_pixels": 0,
                      "video_max_pixels": 25165824, "video_min_pixels": 0}
    assert "video_max_pixels 25165824" in why and "65536" in why


def test_video_bounds_from_processor_config_json(tmp_path: Path):
    (tmp_path / "processor_config.json").write_text(json.dumps(
        {"image_processor": {"max_pixels": 1003520}, "video_processor": {"max_pixels": 602112, "min_pixels": 3136},
         "processor_class": "X"}))
    assert derived_pixel_limits(tmp_path, {})[0] == {"image_max_pixels": 1003520, "image_min_pixels": 0,
                                                     "video_max_pixels": 602112, "video_min_pixels": 0}


def test_a_frame_patching_image_processor_is_also_the_video_processor(tmp_path: Path):
    """No video file, but the image processor patches frames in time: transformers loads the video processor from
    the image processor's file, so its bounds are the video's too."""
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "merge_size": 2, "temporal_patch_size": 2}))
    values = derived_pixel_limits(tmp_path, {"video_max_pixels": 65536})[0]
    assert values["video_max_pixels"] == 12845056 and values["video_min_pixels"] == 0


def test_a_source_without_a_video_processor_gets_no_video_bounds(tmp_path: Path):
    """An image-only processor (tiles, no time axis, no video file): nothing derived for video, the example's kept."""
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"crop_to_patches": True, "max_patches": 12, "size": {"height": 448, "width": 448}}))
    values, why = derived_pixel_limits(tmp_path, {"video_max_pixels": 65536, "video_min_pixels": 256})
    assert values == {"image_max_pixels": 12 * 448 * 448, "image_min_pixels": 0}
    assert "no video processor in the source" in why



def test_the_upper_bound_never_shrinks_a_sample_image(tmp_path: Path):
    """A processor of at most 2 tiles of 28x28 (1568 pixels) and a 64x48 sample image: the processor shrinks the
    image itself; a bound of 1568 would make the plugin resample it first (G2 fails it on the pixels), so the bound
    is raised to the largest sample image. A bound above every sample stays the processor's."""
    from PIL import Image

    from msmigrate.agent.routes.fsdp2.pixel_limits import largest_sample_image

    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"crop_to_patches": True, "max_patches": 2, "size": {"height": 28, "width": 28}}))
    data = tmp_path / "data"
    data.mkdir()
    Image.new("RGB", (64, 48)).save(data / "a.png")
    Image.new("RGB", (40, 30)).save(data / "b.png")
    (data / "train.json").write_text(json.dumps([{"images": ["a.png"]}, {"images": [str(data / "b.png")]},
                                                 {"messages": []}, {"images": ["missing.png"]}]))
    assert largest_sample_image(data / "train.json") == 64 * 48
    values, why = derived_pixel_limits(tmp_path, {}, largest_sample_image(data / "train.json"))
    assert values == {"image_max_pixels": 3072, "image_min_pixels": 0}
    assert "raised to 3072, the largest sample image" in why
    assert derived_pixel_limits(tmp_path, {}, 1000)[0]["image_max_pixels"] == 1568
    assert largest_sample_image(tmp_path / "absent.json") is None
