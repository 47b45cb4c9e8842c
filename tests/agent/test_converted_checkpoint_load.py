"""The converted checkpoint reaches the model through the target's own loader, one key to one name: the stand-in's
``hf_utils`` HF load (G1's framework-load probe, what G4's launch runs) leaves a tiny Mixtral's fused experts
unwritten from the source's per-expert checkpoint, naming transformers' merges, and fills every parameter — strictly —
from the checkpoint the plan's conversion wrote."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from msmigrate.core.run_context import RunContext
from msmigrate.testbeds.standin import write_standin
from msmigrate.tools.checkpoint_conversion import convert_checkpoint
from msmigrate.tools.target_checks import framework_load_check

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from tiny_converted_sources import tiny_mixtral  # noqa: E402

pytestmark = pytest.mark.integration

PLUGIN_DIR = "mindspeed_mm/fsdp/models/tiny_moe"
PLUGIN = '''from transformers import MixtralForCausalLM

from mindspeed_mm.fsdp.utils.register import model_register


@model_register.register("tiny_moe")
class TinyMoe(MixtralForCausalLM):
    pass
'''


def test_the_target_loader_fills_every_parameter_from_the_converted_checkpoint(tmp_path):
    source = tiny_mixtral(tmp_path / "source")
    target = write_standin(tmp_path / "MindSpeed-MM", git_init=False, with_assets=False)
    (target / PLUGIN_DIR).mkdir(parents=True)
    (target / PLUGIN_DIR / "__init__.py").write_text(PLUGIN)
    ctx = RunContext(run_id="conv", run_dir=tmp_path / "run", source=source, target=target, model_name="tiny_moe",
                     runtime_python=sys.executable)
    conv = convert_checkpoint(sys.executable, source, ctx.run_dir)
    assert conv.ok and conv.needed, conv.error

    as_shipped = framework_load_check(ctx, plugins=[PLUGIN_DIR], model_id="tiny_moe", load=str(source))
    assert not as_shipped.ok
    result = as_shipped.data["result"]
    assert result["unfilled_count"] == 4 and all("experts" in n for n in result["unfilled"])
    assert "transformers builds them from several checkpoint tensors" in as_shipped.error

    converted = framework_load_check(ctx, plugins=[PLUGIN_DIR], model_id="tiny_moe", load=conv.folder,
                                     load_strict=True)
    assert converted.ok, converted.error
    assert converted.data["result"]["unfilled_count"] == 0
    assert converted.data["result"]["parameters"] == conv.tensors
