"""The image-only composition of a video-capable processor (probes/_processor.py, and the fixtures' own loader) on
a family whose __init__ takes its sub-processors in an order of its own: Video-LLaVA's (image, video, tokenizer).
Before the composition named them, the tokenizer landed in the video slot and the processor had none, so the
plan's media-expansion probe could not run on such a source. The folder is built here offline: a tiny BPE with the
family's `<image>` / `<video>` tokens and Video-LLaVA's own (PIL) image processor, recorded as its processor class."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"


@pytest.fixture(scope="module")
def video_llava_folder(tmp_path_factory):
    from transformers.models.video_llava.image_processing_video_llava import VideoLlavaImageProcessor

    from msmigrate.testbeds.fixtures.tokenizer import build_tokenizer

    folder = tmp_path_factory.mktemp("video_llava")
    tok = build_tokenizer(["<image>", "<video>"], bos="<s>", eos="</s>", pad="<unk>", unk="<unk>")
    tok.save_pretrained(folder)
    VideoLlavaImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}).save_pretrained(folder)
    kwargs = {"patch_size": 7, "vision_feature_select_strategy": "default", "num_additional_image_tokens": 1}
    (folder / "processor_config.json").write_text(json.dumps({"processor_class": "VideoLlavaProcessor", **kwargs}))
    return folder


def _check(proc):
    from PIL import Image

    assert type(proc.tokenizer).__name__ != "NoneType" and hasattr(proc.tokenizer, "convert_tokens_to_ids")
    assert type(proc.image_processor).__name__ == "VideoLlavaImageProcessor"
    assert getattr(proc, "video_processor", None) is None
    out = proc(text=["USER: <image>\nhi ASSISTANT:"], images=[Image.new("RGB", (64, 48))])
    image_id = proc.tokenizer.convert_tokens_to_ids("<image>")
    # (28/7)^2 patch features + CLS, the 'default' strategy drops the CLS: 16 image tokens from one placeholder
    assert list(out["input_ids"][0]).count(image_id) == 16


def test_probe_composes_a_family_with_video_before_tokenizer(video_llava_folder, monkeypatch):
    monkeypatch.syspath_prepend(str(PROBES))
    sys.modules.pop("_processor", None)
    from _processor import image_only_class, load_processor

    import transformers

    proc, how, cls_name, _ = load_processor(str(video_llava_folder), False)
    assert cls_name == "VideoLlavaProcessor"
    if "composed" not in how:
        pytest.skip("this runtime loads the whole processor (torchvision installed)")
    _check(proc)
    # the composition also keeps the families whose order is (image, tokenizer, video)
    composed = image_only_class(transformers.Qwen2VLProcessor)
    assert composed.get_attributes() == ["image_processor", "tokenizer"]


def test_fixture_loader_composes_it_too(video_llava_folder):
    from msmigrate.testbeds.fixtures.processor_loading import load_processor, needs_image_only

    if not needs_image_only("VideoLlavaProcessor"):
        pytest.skip("this runtime loads the whole processor (torchvision installed)")
    _check(load_processor(video_llava_folder))
