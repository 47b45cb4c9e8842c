"""A stop of the run reaching a running Slurm job: the job may end by itself during a grace period the user is
told about; after it, the job is cancelled (``scancel``) and the gate's launch ends "cancelled"."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

from msmigrate.agent.stop_grace import StopGrace
from msmigrate.core.run_context import RunContext
from msmigrate.tools.launcher import LaunchSpec, launch, slurm_jobs, slurm_run
from msmigrate.tools.launcher.slurm_jobs import JobInfo
from msmigrate.tools.launcher.slurm_options import SlurmOptions


def test_stop_grace_is_set_only_after_the_grace_period():
    now, stop, events = [0.0], [False], []
    grace = StopGrace(lambda: stop[0], 60.0, lambda kind, **data: events.append((kind, data)), "G4 single-process",
                      clock=lambda: now[0])
    assert not grace.is_set() and events == []
    now[0], stop[0] = 10.0, True
    assert not grace.is_set()
    (kind, data), = events
    assert kind == "stop_grace" and data["grace_s"] == 60.0
    assert data["detail"].startswith("stop requested: the Slurm job of G4 single-process is cancelled in 60 s")
    now[0] = 69.9
    assert not grace.is_set()
    now[0] = 70.0
    assert grace.is_set() and len(events) == 1  # told once


def test_a_stopped_run_cancels_its_slurm_job_after_the_grace(tmp_path, monkeypatch):
    target = tmp_path / "target"
    (target / "examples" / "m").mkdir(parents=True)
    (target / "examples" / "m" / "run.sh").write_text("#!/bin/bash\necho never run here\n")
    ctx = RunContext(run_id="r1", run_dir=tmp_path / "run", source=tmp_path / "src", target=target, model_name="m")
    spec = LaunchSpec(gate="G4", script="examples/m/run.sh", device="cpu", backend="slurm",
                      slurm=SlurmOptions(poll_s=0.01))
    clock, cancelled_at = [0.0], []

    def info(job_id):  # runs until cancelled; each poll is 10 s of the fake clock
        clock[0] += 10.0
        return JobInfo(job_id, "CANCELLED" if cancelled_at else "RUNNING", nodes="n1",
                       exit_code=0 if cancelled_at else None)

    def submit(argv):
        Path(next(a for a in argv if a.startswith("--output=")).split("=", 1)[1]).write_text("")
        return "4242"

    monkeypatch.setattr(slurm_jobs, "submit", submit)
    monkeypatch.setattr(slurm_jobs, "job_info", info)
    monkeypatch.setattr(slurm_jobs, "cancel", lambda job, signal=None: cancelled_at.append(clock[0]) or True)
    monkeypatch.setattr(slurm_jobs, "find_job", lambda name: None)
    monkeypatch.setattr(slurm_run, "LOG_SETTLE_S", 0.0)
    events = []
    stop_at = 30.0  # the user stops the run while the job runs
    grace = StopGrace(lambda: clock[0] >= stop_at, 60.0, lambda kind, **data: events.append(kind), "G4 x",
                      clock=lambda: clock[0])
    res = launch(ctx, spec, cancel=grace)
    assert res.data["status"] == "cancelled" and len(cancelled_at) == 1
    assert cancelled_at[0] >= stop_at + 60.0  # not before the grace period ended
    assert events == ["stop_grace"]


def test_gate_launches_on_slurm_carry_the_runs_stop(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from msmigrate.agent.config import RunSpec
    from msmigrate.agent.routes.fsdp2.gates import training
    from msmigrate.core.tool_result import ToolResult

    seen = {}

    def fake_launch(ctx, spec, on_progress=None, cancel=None):
        seen[spec.backend] = cancel
        return ToolResult(ok=True, data={"summary": {}})

    monkeypatch.setattr(training, "launch", fake_launch)
    stop = [False]
    for backend in ("slurm", "local"):
        spec = RunSpec.model_validate({"source": "s", "target": "t", "model_name": "m1", "launch": {
            "backend": backend, "device": "cpu", "slurm": {"partition": "debug", "stop_grace_s": 5}}})
        ctx = RunContext(run_id="r", run_dir=tmp_path / "run", source=tmp_path, target=tmp_path, model_name="m1")
        deps = SimpleNamespace(spec=spec, ctx=ctx, emit=lambda *a, **k: None, stop_requested=lambda: stop[0],
                               idle_s=0.0)
        if backend == "local":
            monkeypatch.setattr(training, "launch_slots", nullcontext)
        training.run_launch(deps, {"plan": {"config_path": "c.yaml"}, "started_at": 1.0}, "G4", "single", 1, {})
    assert isinstance(seen["slurm"], StopGrace) and seen["slurm"].grace_s == 5
    assert seen["local"] is None  # a local launch ends its step; the next gate is not started
