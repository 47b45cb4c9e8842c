"""Floating media tensors follow the compute dtype (probes/_model_build.py ``to_compute_dtype``, used by G1's
forward and by model parity): a processor that returns bf16 pixels failed the probes' fp32 forward wherever the
vision tower does not cast its input itself. Shown on a tiny transformers ConvNeXt (a vision backbone that feeds
pixels straight into its patch convolution), then on a tiny Qwen2-VL fed its own processor's batch in bf16."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"


@pytest.fixture()
def probes(monkeypatch):
    monkeypatch.syspath_prepend(str(PROBES))
    for name in ("_processor", "_data_parity", "_model_build", "forward_smoke"):
        sys.modules.pop(name, None)
    import _model_build
    import forward_smoke

    return _model_build, forward_smoke


def test_bf16_pixels_feed_an_fp32_forward(tmp_path, probes):
    import torch
    import transformers

    from msmigrate.testbeds.fixtures import build_source

    mb, fs = probes
    backbone = transformers.ConvNextModel(transformers.ConvNextConfig(
        num_channels=3, hidden_sizes=[8, 16], depths=[1, 1], num_stages=2, patch_size=4)).float()
    pixels = {"pixel_values": torch.randn(1, 3, 32, 32).to(torch.bfloat16)}
    with pytest.raises(RuntimeError):  # the old failure: pixels fed in the dtype the processor gave them
        backbone(**pixels)
    assert torch.isfinite(backbone(**mb.to_compute_dtype(pixels, backbone)).last_hidden_state).all()

    folder = build_source("qwen2_vl", tmp_path / "src")
    config = transformers.AutoConfig.from_pretrained(folder)
    cls = transformers.Qwen2VLForConditionalGeneration
    batch = fs.sample_batch(str(folder), str(folder / "data" / "train.json"), config, mb.forward_params(cls)[0], False)
    batch["pixel_values"] = batch["pixel_values"].to(torch.bfloat16)
    model = cls(config).float()
    fed = mb.to_compute_dtype(batch, model)
    assert fed["pixel_values"].dtype == torch.float32 and fed["image_grid_thw"].dtype == batch["image_grid_thw"].dtype
    assert torch.isfinite(model(**fed, use_cache=False).loss)
