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

A processor config with none of these leaves the example's keys as they are, said in the notes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PIXEL_KEYS = ("image_max_pixels", "image_min_pixels")
PIXELS_PATH = "data.dataset_param.preprocess_parameters"


def image_processor_config(source: Path) -> dict[str, Any]:
    """The image processor's saved settings: preprocessor_config.json, else processor_config.json's
    ``image_processor`` entry (newer transformers save the processor in one file)."""
    for name, key in (("preprocessor_config.json", None), ("processor_config.json", "image_processor")):
        path = Path(source) / name
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        data = data.get(key) if key else data
        if isinstance(data, dict) and data:
            return data
    return {}


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


def derived_pixel_limits(source: Path, current: dict[str, Any]) -> tuple[dict[str, int], str]:
    """(the keys to write — None: remove it —, why) for the delivered preprocess_parameters; ({}, why) where the
    processor config says nothing to derive them from."""
    bounds = pixel_bounds(image_processor_config(source))
    if bounds is None:
        kept = {k: current.get(k) for k in PIXEL_KEYS if k in current}
        return {}, (f"{PIXELS_PATH}: the source's image processor config states no resolution or pixel bounds; "
                    f"the example's {kept or 'defaults'} kept")
    high, low, how = bounds
    values = {"image_max_pixels": high, "image_min_pixels": low}
    was = {k: current.get(k) for k in PIXEL_KEYS if k in current}
    said = (f"image_max_pixels {high}, image_min_pixels {low}" if high is not None
            else "image_max_pixels / image_min_pixels left to the framework")
    return values, (f"{PIXELS_PATH} {said} from the source's image processor ({how})"
                    + (f"; the similar example had {was}" if was and was != values else ""))
