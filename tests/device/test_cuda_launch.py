"""On a machine with an accelerator the launcher takes the framework's own device path (no CPU shim): the
stand-in's pre-existing example trains on CUDA with NCCL. Skipped without a GPU (this project's CI has none)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.device, pytest.mark.integration,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_standin_example_trains_on_cuda(tmp_path):
    from msmigrate.testbeds.standin import write_standin
    from msmigrate.core.run_context import RunContext
    from msmigrate.tools.launcher import LaunchSpec, launch

    target = write_standin(tmp_path / "target")
    ctx = RunContext(run_id="device-check", run_dir=tmp_path / "run", source=tmp_path, target=target,
                     model_name="qwen3vl")
    ctx.run_dir.mkdir()
    spec = LaunchSpec(gate="device", config="examples/qwen3vl/qwen3vl_config.yaml", nproc=1, device="cuda",
                      overrides={"training": {"init_model_with_meta_device": True}}, timeout_s=600)
    res = launch(ctx, spec)
    assert res.ok, res.error
    summary = res.data["summary"]
    assert res.data["device"] == "cuda" and summary["steps"] >= 5 and summary["loss_finite"]
    assert "cpu_shim" not in " ".join(res.data["argv"])
