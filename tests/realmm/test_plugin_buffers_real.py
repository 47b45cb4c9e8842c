"""The rules policy's model plugin on the real runtime (torch 2.7.1 + transformers 4.57) and the real checkout: after
meta-device init + ``to_empty`` every buffer equals an eager build's. transformers 4.57's init_weights rebuilds no
rotary ``inv_freq`` (5.x does), so this is where a plugin that leaves it to init_weights gets NaN."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
from test_model_plugin_template import assert_all_rebuilt, buffers_after_to_empty  # noqa: E402

from realmm_helpers import source_for_runtime  # noqa: E402

pytestmark = pytest.mark.realmm


@pytest.mark.parametrize("family", ["gemma3", "qwen2_vl"])
def test_plugin_rebuilds_every_buffer_on_the_real_runtime(tmp_path, real_checkout, real_runtime, family):
    import shutil

    target = tmp_path / "MindSpeed-MM"  # a copy: the session's checkout is shared read-only
    shutil.copytree(real_checkout / "mindspeed_mm", target / "mindspeed_mm", symlinks=True)
    source = source_for_runtime(family, tmp_path / "src", real_runtime)
    result = buffers_after_to_empty(real_runtime, target, family, source)
    assert result["transformers"].startswith("4.")
    assert_all_rebuilt(result, family)
