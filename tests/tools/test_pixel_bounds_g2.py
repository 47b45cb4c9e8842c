"""G2's media-input parity at a sample's real size: a data-path pixel bound (image_max_pixels / image_min_pixels,
which the framework's mm_plugin applies before the processor) that resizes a sample image the source processor takes
as it is fails G2 naming the key; a bound the data path does not apply, or one the image fits, changes nothing."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest
from PIL import Image

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"
sys.path.insert(0, str(PROBES))  # the probes import their siblings, as they do in the target runtime
spec = importlib.util.spec_from_file_location("batch_parity_probe_bounds", PROBES / "_batch_parity.py")
bp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bp)


@pytest.fixture(scope="module")
def qwen2_vl(tmp_path_factory):
    from msmigrate.testbeds.fixtures import build_source

    return build_source("qwen2_vl", tmp_path_factory.mktemp("bounds") / "qwen2_vl")


class _BoundedCollator:
    """An mm_plugin's collate step: each image scaled into ``max_pixels`` (aspect kept) as the framework's
    ``_preprocess_image`` does where the loader set the bound on the processor, then the image processor."""

    def __init__(self, processor, max_pixels=None):
        self.processor, self.max_pixels = processor, max_pixels

    def __call__(self, examples):
        images = []
        for e in examples:
            for p in e["images"]:
                img = Image.open(p).convert("RGB")
                if self.max_pixels and img.width * img.height > self.max_pixels:
                    scale = math.sqrt(self.max_pixels / (img.width * img.height))
                    img = img.resize((max(1, int(img.width * scale)), max(1, int(img.height * scale))))
                images.append(img)
        return dict(self.processor.image_processor(images, return_tensors="pt"))


def _examples(source: Path):
    data = source / "data" / "train.json"
    sample = json.loads(data.read_text())[0]
    paths = [str(source / "data" / p) for p in sample["images"]]
    return data, [{"images": paths}], Image.open(paths[0]).size


def test_a_bound_that_shrinks_the_sample_image_fails_naming_the_key(qwen2_vl):
    from _processor import load_processor

    proc = load_processor(str(qwen2_vl), False)[0]
    data, examples, (w, h) = _examples(qwen2_vl)
    clamp = (w * h) // 4
    out = bp.media_input_parity(str(qwen2_vl), str(data), examples, _BoundedCollator(proc, clamp),
                                bounds={"image_max_pixels": clamp, "image_min_pixels": 0})
    named = [p for p in out["problems"] if f"image_max_pixels {clamp} shrinks image 0 ({w}x{h} = {w * h} pixels)" in p]
    assert named and "pixel_values" in named[0], out["problems"]


def test_a_bound_the_data_path_does_not_apply_or_the_image_fits_passes(qwen2_vl):
    from _processor import load_processor

    proc = load_processor(str(qwen2_vl), False)[0]
    data, examples, (w, h) = _examples(qwen2_vl)
    # declared but not applied (the loader never set it on the processor): the pixels are the source's
    unapplied = bp.media_input_parity(str(qwen2_vl), str(data), examples, _BoundedCollator(proc),
                                      bounds={"image_max_pixels": (w * h) // 4})
    assert unapplied["problems"] == [], unapplied["problems"]
    fits = bp.media_input_parity(str(qwen2_vl), str(data), examples, _BoundedCollator(proc, w * h),
                                 bounds={"image_max_pixels": w * h, "image_min_pixels": 0})
    assert fits["problems"] == [], fits["problems"]
