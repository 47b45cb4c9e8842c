"""In the real target runtime (transformers 4.57, no conversion mapping: checkpoints load key by key) no source's
checkpoint is converted and no file is written — the same sources transformers 5 does convert (Mixtral's per-expert
layout) are read as they are there."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from msmigrate.tools.checkpoint_conversion import CONVERTED_DIR, convert_checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from tiny_converted_sources import tiny_llama, tiny_mixtral  # noqa: E402

pytestmark = pytest.mark.realmm


@pytest.mark.parametrize("build", [tiny_mixtral, tiny_llama], ids=["mixtral", "llama"])
def test_the_real_runtime_converts_nothing(tmp_path, real_runtime, build):
    source = build(tmp_path / "source")
    conv = convert_checkpoint(real_runtime, source, tmp_path / "run", timeout=600)
    assert conv.ok, conv.error
    assert conv.transformers.startswith("4.") and not conv.needed and conv.converters == []
    assert not (tmp_path / "run" / CONVERTED_DIR).exists()
