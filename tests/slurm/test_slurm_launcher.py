"""The Slurm backend of the launcher against a real slurmctld and two slurmd: a two-node torchrun of the stand-in
example (one torchrun per node through srun), a refused submission, and cancellation (scancel) of a running
training job on a timeout and on Ctrl-C. Successful G4–G6 jobs, their evidence and
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


def test_two_node_g6_one_torchrun_per_node(ctx, slurm_cluster):
    """nnodes=2: srun starts torchrun on n1 and n2 (node rank from $SLURM_NODEID), both meet at n1's NodeAddr and
    form one 2-rank data-parallel group."""
    res = launch(ctx, _spec(gate="G6-2nodes", nproc=1, nnodes=2))
    log = Path(res.data["log_path"]).read_text()
    assert res.ok, f"{res.error}\n{log[-3000:]}\n{slurm_cluster.log('slurmd-*.log')}"
    d = res.data
    assert d["job_state"] == "COMPLETED" and d["exit_code"] == 0 and d["nodes"] == "n[1-2]"
    assert f"[msmigrate] slurm job {d['job_id']} nodes n[1-2] master n1 (127.0.0.1:" in log
    assert d["summary"]["global_batch_size"] == 2 and d["summary"]["steps"] >= 5 and d["summary"]["loss_finite"]
    argv = d["argv"]
    assert argv[argv.index("--nnodes") + 1] == "2" and argv[argv.index("--nproc_per_node") + 1] == "1"
    assert "--node_rank" not in argv  # each node's rank came from its Slurm task
    again = launch(ctx, _spec(gate="G6-2nodes", nproc=1, nnodes=2))
    assert again.ok and again.data["reused"] and again.data["job_id"] == d["job_id"]  # not submitted twice


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
