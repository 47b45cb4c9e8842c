"""The generated mm_plugin's two halves take one image path: the pixels ``get_mm_inputs`` returns come from the same
full-processor call whose expansion ``process_messages`` wrote. Seen in the open-world sweep: a processor that tiles
each image (its own default, not the bare image processor's) expanded 13 tiles of tokens while the bare image
processor gave the forward 1 tile of pixels, and the model rejected the batch ("tokens: 6656, features: 512")."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from PIL import Image
from transformers import ProcessorMixin

from msmigrate.agent.data_branch_b import render_shared_plugin
import msmigrate

MM_PLUGIN = Path(msmigrate.__file__).parent / "testbeds/standin/tree/mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py"
TILES, TOKENS_PER_TILE = 3, 2


class _Tokenizer:
    def decode(self, ids, **_):
        return "".join("<t>" if i == 7 else "?" for i in ids)


class _BareImageProcessor:
    """The image processor alone: one tile per image (the processor turns its tiling on)."""

    def __call__(self, images, return_tensors=None, **_):
        return {"pixel_values": torch.zeros(len(images), 3, 4, 4)}


class _TilingProcessor(ProcessorMixin):
    """A full processor that tiles every image: TILES tiles of pixels, TILES * TOKENS_PER_TILE tokens."""

    def __init__(self):  # noqa: D401  (no ProcessorMixin setup: only the call path is exercised)
        self.tokenizer, self.image_processor = _Tokenizer(), _BareImageProcessor()

    def __call__(self, text=None, images=None, return_tensors=None, **_):
        per_image = [7] * (TILES * TOKENS_PER_TILE)
        ids = [tok for chunk in text[0].split("<ph>")[1:] for tok in per_image]
        return {"input_ids": [ids], "pixel_values": torch.zeros(len(images) * TILES, 3, 4, 4)}


def _plugin_module():
    spec = importlib.util.spec_from_file_location("standin_mm_plugin", MM_PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    exec(compile(render_shared_plugin(), "mm_plugin_shared", "exec"), module.__dict__)  # noqa: S102
    return module


def test_pixels_come_from_the_processor_call_that_counted_the_tokens():
    module = _plugin_module()
    plugin_cls = type("Tiled", (module.ProcessorExpansionPlugin,), {
        "placeholder": "<ph>", "mm_input_keys": ["pixel_values"], "processor_class": "_TilingProcessor"})
    plugin = plugin_cls(image_token="<t>", video_token=None, audio_token=None)
    proc = _TilingProcessor()
    images = [Image.new("RGB", (32, 32), "grey"), Image.new("RGB", (48, 32), "white")]
    messages = plugin.process_messages([{"role": "user", "content": "<image><image>hi"}], images, [], [], proc)
    tokens = messages[0]["content"].count("<t>")
    out = plugin.get_mm_inputs(images, [], [], [2], [0], [0], [[0]], proc)
    assert tokens == len(images) * TILES * TOKENS_PER_TILE
    # as many feature tiles as the expansion counted: TILES per image, not the bare image processor's one
    assert out["pixel_values"].shape[0] * TOKENS_PER_TILE == tokens
