"""The data path's image pixel bounds (``image_max_pixels`` / ``image_min_pixels`` in
``data.dataset_param.preprocess_parameters``) derived from the source's own image processor config. The framework's
mm_plugin resizes every image into [min, max] pixels (aspect kept) BEFORE the processor sees it, so a bound carried
from the similar example (sized for that example's model, or a tiny test model: 4096 pixels) shrinks a real image
that the source's processor would have taken at full size, and the model trains on blurred pixels while every token
count still matches. The bounds are read from how the processor itself bounds an image:

- explicit pixel bounds (``min_pixels`` / ``max_pixels``, or a ``size`` of ``shortest_edge`` / ``longest_edge`` pixel
  counts where the processor resizes by pixel area into patch × merge multiples): its upper bound, and no lower one.
  The plugin's own enlargement is not the processor's (another rounding): on the real MindSpeed-MM a GLM-4V source
  whose processor bounds every image to 6272 pixels got 2 image tokens where its processor makes 4 once the plugin
  first enlarged a 64×48 image to 6272; left at 0, the processor enlarges it by its own rule;
- tiling (``max_patches`` tiles of ``size`` height × width): at most that many tiles' pixels, no lower bound (the
  processor resizes each tile to its size itself);
- a resize of every image to the processor's own size (``size`` height × width, ``shortest_edge`` / ``crop_size``,
  or a longest edge as a side length): no bound of the processor's own to keep, and any bound below an image's size
  would resize it twice (the plugin's resample, then the processor's), so the keys are removed and the framework's
  own defaults apply (the similar example's bound was chosen for another model).

A processor config with none of these leaves the example's keys as they are, said in the notes.

The upper bound is raised to the largest image the user's samples hold where it is smaller: a processor shrinks an
image above its own bound itself (a tiling processor to at most ``max_patches`` tiles, a pixel-bounded one into
its max pixels), and the plugin's resize before it (nearest-neighbour) would only resample it twice — G2 fails a
sample whose pixels then differ from the source processor's. Found on the stand-in once it applied the bounds: a
64×48 sample image and a processor of at most 2 tiles of 28×28 (1568 pixels).

Video frames go through the same resize with ``video_max_pixels`` / ``video_min_pixels`` (the framework regularises
each sampled frame as an image), so those bounds are derived the same way from the source's video processor config:
``video_preprocessor_config.json``, else ``processor_config.json``'s ``video_processor`` entry, else — where the image
processor patches frames in time (``temporal_patch_size``) — the image processor's own file, which is where
transformers loads such a processor's video processor from when the checkpoint has no video file of its own. A
source with none of these has no video processor to follow: no video key is written (the example's, if any, stay;
they are inert without one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from msmigrate.tools.repo_reader.processor_code import json_object

PIXEL_KEYS = ("image_max_pixels", "image_min_pixels")
VIDEO_KEYS = ("video_max_pixels", "video_min_pixels")
PIXELS_PATH = "data.dataset_param.preprocess_parameters"


def image_processor_config(source: Path) -> dict[str, Any]:
    """The image processor's saved settings: preprocessor_config.json, else processor_config.json's
    ``image_processor`` entry (newer transformers save the processor in one file)."""
    own = json_object(Path(source) / "preprocessor_config.json")
    if own:
        return own
    nested = json_object(Path(source) / "processor_config.json").get("image_processor")
    return nested if isinstance(nested, dict) else {}


def video_processor_config(source: Path) -> dict[str, Any] | None:
    """The video processor's saved settings, or None where the source has no video processor config (see the
    module's docstring for the order, which is transformers' own)."""
    own = json_object(Path(source) / "video_preprocessor_config.json")
    if own:
        return own.get("video_processor") if isinstance(own.get("video_processor"), dict) else own
    nested = json_object(Path(source) / "processor_config.json").get("video_processor")
    if isinstance(nested, dict) and nested:
        return nested
    image = image_processor_config(source)
    return image if _side(image.get("temporal_patch_size")) else None


def _side(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def pixel_bounds(ip: dict[str, Any]) -> tuple[int | None, int | None, str] | None:
    """(max pixels, min pixels, how the processor bounds an image) from an image processor config, (None, None, how)
    for a processor that resizes every image to its own size; None where it says nothing about sizes."""
    size = ip.get("size") if isinstance(ip.get("size"), dict) else {}
    if _side(ip.get("max_pixels")):
        return int(ip["max_pixels"]), 0, "its max_pixels; its min_pixels it applies itself"
    area_resize = any(k in ip for k in ("merge_size", "temporal_patch_size"))  # resizes by area into patch multiples
    if area_resize and _side(size.get("longest_edge")) and _side(size.get("shortest_edge")):
        return (int(size["longest_edge"]), 0,
                "its size bound longest_edge (pixel counts: it resizes by area into patch multiples; its lower "
                "bound it applies itself)")
    tile = (_side(size.get("height")) or 0) * (_side(size.get("width")) or 0)
    if tile and _side(ip.get("max_patches")):
        return (int(ip["max_patches"]) * tile, 0,
                f"at most {int(ip['max_patches'])} tiles of {size['height']}x{size['width']}")
    crop = ip.get("crop_size") if isinstance(ip.get("crop_size"), dict) else {}
    if tile or _side(crop.get("height")) or _side(size.get("shortest_edge")) or _side(size.get("longest_edge")):
        return None, None, ("it resizes every image to its own size itself (no pixel bound of its own): the "
                            "framework's defaults apply")
    return None


def largest_sample_image(data_json: Path | None) -> int | None:
    """The pixel count of the largest image the samples name (``images`` paths, relative to the dataset's folder as
    the delivered ``dataset_dir`` reads them, or absolute); None where they name none that opens."""
    from PIL import Image, UnidentifiedImageError  # (matplotlib, an agent dependency, brings Pillow)

    try:
        samples = json.loads(Path(data_json).read_text(encoding="utf-8")) if data_json else []
    except (OSError, json.JSONDecodeError):
        return None
    largest = None
    for sample in samples if isinstance(samples, list) else []:
        for name in (sample.get("images") or []) if isinstance(sample, dict) else []:
            path = Path(name) if Path(name).is_absolute() else Path(data_json).parent / name
            try:
                with Image.open(path) as image:  # reads the header only
                    area = image.width * image.height
            except (OSError, UnidentifiedImageError):
                continue
            largest = area if largest is None else max(largest, area)
    return largest


def derived_pixel_limits(source: Path, current: dict[str, Any],
                         largest_image: int | None = None) -> tuple[dict[str, int | None], str]:
    """(the keys to write — None: remove it —, why) for the delivered preprocess_parameters: the image bounds from
    the image processor (the upper one at least ``largest_image``, the samples' largest image's pixels), the video
    bounds from the video processor; ({}, why) where neither says anything to derive them from."""
    values, why = _derived(image_processor_config(source), current, PIXEL_KEYS, "image")
    high = values.get("image_max_pixels")
    if high is not None and largest_image and largest_image > high:
        values["image_max_pixels"] = largest_image
        why += (f"; image_max_pixels raised to {largest_image}, the largest sample image, so that no sample is "
                f"resampled before the processor (which shrinks it itself)")
    video = video_processor_config(source)
    if video is None:
        return values, why + f"; no video processor in the source: no {' / '.join(VIDEO_KEYS)} derived"
    more, said = _derived(video, current, VIDEO_KEYS, "video")
    return {**values, **more}, f"{why}; {said}"


def _derived(config: dict[str, Any], current: dict[str, Any], keys: tuple[str, str],
             kind: str) -> tuple[dict[str, int | None], str]:
    high_key, low_key = keys
    bounds = pixel_bounds(config)
    if bounds is None:
        kept = {k: current.get(k) for k in keys if k in current}
        return {}, (f"{PIXELS_PATH}: the source's {kind} processor config states no resolution or pixel bounds; "
                    f"the example's {kept or 'defaults'} kept")
    high, low, how = bounds
    values = {high_key: high, low_key: low}
    was = {k: current.get(k) for k in keys if k in current}
    said = (f"{high_key} {high}, {low_key} {low}" if high is not None
            else f"{high_key} / {low_key} left to the framework")
    return values, (f"{PIXELS_PATH} {said} from the source's {kind} processor ({how})"
                    + (f"; the similar example had {was}" if was and was != values else ""))
