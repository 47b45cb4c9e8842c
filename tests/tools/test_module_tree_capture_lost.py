"""``capture_lost`` (probes/module_tree.py): the sub-models whose hook-based output capture FSDP2's ``fully_shard``
loses. transformers 5 keys ``_can_record_outputs`` by class name and fully_shard swaps the module's class, so a
sharded vision tower returned ``hidden_states=None`` to the parent that reads a feature layer from them (seen in the
open-world sweep at G4; G1–G3 run unsharded). The probe's measurement (a class swap on the model) is checked against
a real ``fully_shard`` on a one-rank gloo group."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"
TINY_LLAVA = """
import torch
from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration
vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                          image_size=28, patch_size=14)
text = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                   num_key_value_heads=2, vocab_size=64)
model = LlavaForConditionalGeneration(LlavaConfig(vision_config=vision, text_config=text, image_token_index=3))
"""


def test_the_probe_names_the_sub_models_a_class_swap_leaves_without_capture():
    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("transformers 4.x reads the capture settings off the class: nothing is lost")
    sys.path.insert(0, str(PROBES))
    try:
        sys.modules.pop("module_tree", None)
        import module_tree
    finally:
        sys.path.remove(str(PROBES))
    scope: dict = {}
    exec(TINY_LLAVA, scope)  # noqa: S102
    lost = module_tree.capture_lost(scope["model"])
    assert "model.vision_tower" in lost and "" not in lost
    assert not any(n.endswith(("layers.0", "embeddings")) for n in lost)  # blocks are no PreTrainedModel


REAL_SHARD = """
import os, torch.distributed as dist
from torch.distributed.fsdp import fully_shard
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"], RANK="0", WORLD_SIZE="1")
dist.init_process_group("gloo")
px = torch.randn(1, 3, 28, 28)
for tower_too in (False, True):
    exec(TINY_LLAVA)
    vt = model.model.vision_tower
    for layer in vt.encoder.layers if hasattr(vt, "encoder") else vt.vision_model.encoder.layers:
        fully_shard(layer)
    if tower_too:
        fully_shard(vt)
    print("tower" if tower_too else "layers", vt(pixel_values=px, output_hidden_states=True).hidden_states is not None)
dist.destroy_process_group()
"""


def test_a_real_fully_shard_loses_exactly_that(tmp_path):
    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("transformers 4.x")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = TINY_LLAVA + f"TINY_LLAVA = {TINY_LLAVA!r}\n" + REAL_SHARD
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PORT": str(port)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "layers True" in done.stdout and "tower False" in done.stdout, done.stdout
