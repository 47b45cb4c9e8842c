"""The Slurm backend of the launcher against a real slurmctld/slurmd: a refused submission, and cancellation
(scancel) of a running stand-in training job on a timeout and on Ctrl-C. Successful G4–G6 jobs, their evidence and
re-attaching after kill -9 are in test_slurm_agent_e2e.py."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from msmigrate.core.run_context import RunContext
from msmigrate.tools.launcher import LaunchSpec, SlurmOptions, launch, read_launches
from msmigrate.tools.launcher.slurm_jobs import job_info

standin = pytest.importorskip("msmigrate.testbeds.standin")
pytestmark = [pytest.mark.slurm, pytest.mark.integration]
CONFIG = "examples/qwen3vl/qwen3vl_config.yaml"


@pytest.fixture(scope="module")
def ctx(tmp_path_factory, slurm_cluster) -> RunContext:
    root = tmp_path_factory.mktemp("slurm_it")
    target = standin.write_standin(root / "target")
    return RunContext(run_id="slurm-it", run_dir=root / "run", source=root / "src", target=target,
                      model_name="qwen3vl", runtime_python=sys.executable)


def _spec(**kw) -> LaunchSpec:
    base = dict(gate="G6", config=CONFIG, nproc=2, device="cpu", timeout_s=600, no_output_timeout_s=300,
                backend="slurm", slurm=SlurmOptions(poll_s=0.5))
    return LaunchSpec(**{**base, **kw})


def _events(run_dir: Path, launch_id: str) -> list[dict]:
    return [e for e in (json.loads(ln) for ln in (run_dir / "launches.jsonl").read_text().splitlines())
            if e.get("launch_id") == launch_id]


def test_refused_submission_is_an_observation(ctx):
    res = launch(ctx, _spec(gate="G6-badpart", slurm=SlurmOptions(partition="no_such_partition")))
    assert not res.ok and res.data["status"] == "submit_failed"
    assert "sbatch failed" in res.error and "partition" in res.error.lower()


def test_timeout_cancels_the_job(ctx):
    res = launch(ctx, _spec(gate="G6-timeout", overrides={"training.train_iters": 100000}, timeout_s=1))
    assert res.data["status"] == "timeout" and not res.ok
    assert res.data["job_state"] == "CANCELLED", res.data
    events = _events(ctx.run_dir, res.data["launch_id"])
    assert any(e["event"] == "cancelling" and e["reason"] == "timeout" for e in events)
    # no accounting on the test cluster: sacct fails, the end state comes from scontrol show job
    assert events[-1]["event"] == "finished" and events[-1]["job_info_source"] == "scontrol"


def test_ctrl_c_cancels_the_job(ctx):
    def interrupt(_rec):
        raise KeyboardInterrupt

    spec = _spec(gate="G6-ctrlc", overrides={"training.train_iters": 100000})
    with pytest.raises(KeyboardInterrupt):
        launch(ctx, spec, on_progress=interrupt)
    (rec,) = [r for r in read_launches(ctx.run_dir) if r.gate == "G6-ctrlc"]
    assert rec.status == "launcher_error" and rec.job_id
    state = None
    for _ in range(60):  # scancel is asynchronous: the job passes through COMPLETING
        state = job_info(rec.job_id).state
        if state == "CANCELLED":
            break
        time.sleep(0.5)
    assert state == "CANCELLED"
