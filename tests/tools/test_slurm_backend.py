"""Slurm backend without a cluster: option validation (nothing from a spec or a chat edit reaches a shell
unchecked), the job script run under a fake srun/scontrol (rendezvous per node, quoting that does not execute what
it quotes), sbatch argv, state parsing from recorded real outputs, status mapping, and the re-attach / recover-by-name
paths of a resumed launch. The real cluster is exercised in tests/slurm/ (marker ``slurm``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from msmigrate.agent.config import LaunchSettings, RunSpec
from msmigrate.core.run_context import RunContext
from msmigrate.tools.launcher import (
    Command, DeviceInfo, LaunchSpec, SlurmOptions, build_command, launch, launch_key, read_launches, records,
)
from msmigrate.tools.launcher import slurm_jobs, slurm_run
from msmigrate.tools.launcher.slurm_jobs import JobInfo, parse_exit_code, parse_scontrol_line
from msmigrate.tools.launcher.slurm_script import render_script, sbatch_argv

ITER = ("[Rank 0 | Local Rank 0] 2026-11-30 04:01:23,292 INFO [mindspeed_mm.fsdp.train.train_engine:48] =>  "
        "[2026-11-30 04:01:23] iteration {i:8d}/{n:8d} | consumed samples: {c:12d} | elapsed time per iteration (ms): "
        "100.0 | learning rate: 1.000000E-04 | global batch size:     2 | loss: {loss:.6E} | grad norm: 1.000 |")
# recorded from slurm-wlm 22.05 (scontrol show job -o, accounting disabled), trimmed after the fields read
SCONTROL_LINE = (
    "JobId=7 JobName=msm-1a2b3c4d-g6-2-ranks-f621fbc0fda1-a1 UserId=root(0) GroupId=root(0) MCS_label=N/A "
    "Priority=4294901759 Nice=0 Account=(null) QOS=(null) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) "
    "Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=1:0 RunTime=00:00:21 TimeLimit=00:16:00 TimeMin=N/A "
    "SubmitTime=2026-12-01T08:44:45 Partition=debug AllocNode:Sid=localhost:3369 ReqNodeList=(null) "
    "ExcNodeList=(null) NodeList=vm BatchHost=vm NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 "
    "Command=/runs/r 1/launches/g6/job.sh WorkDir=/runs/r 1/launches/g6 StdOut=/runs/r 1/launches/g6/train.log")


# ---------------------------------------------------------------- options: what a spec / chat edit may say
@pytest.mark.parametrize("field,value", [
    ("partition", "debug"), ("partition", "npu,npu-long"), ("account", "proj_mm-01"), ("qos", "high"),
    ("gres", "npu:8"), ("gres", "gpu:a100:4"), ("gres", "gpu:2,mps:100"), ("time", "30"), ("time", "02:00:00"),
    ("time", "1-12:00"), ("time", "UNLIMITED"), ("mem", "256G"), ("constraint", "a910b&ib"),
])
def test_slurm_options_accept_real_syntax(field, value):
    assert getattr(SlurmOptions(**{field: value}), field) == value


@pytest.mark.parametrize("field,value", [
    ("partition", "debug; rm -rf ~"), ("partition", "$(id)"), ("account", "a b"), ("qos", "-x"),
    ("gres", "npu:8 --wrap=id"), ("gres", "npu:8\n"), ("time", "1:00;id"), ("time", "soon"), ("mem", "1G'"),
    ("constraint", "a b"), ("cann_set_env", ["relative/set_env.sh"]), ("env", {"BAD NAME": "x"}),
])
def test_slurm_options_refuse_what_slurm_would_not_take(field, value):
    with pytest.raises(ValidationError):
        SlurmOptions(**{field: value})


def test_spec_and_chat_edits_validate_backend_and_slurm_fields(tmp_path):
    spec = RunSpec.model_validate({"source": "s", "target": "t", "model_name": "m1", "launch": {
        "backend": "slurm", "nnodes": 2, "slurm": {"partition": "npu", "gres": "npu:8", "time": "01:00:00"}}})
    assert spec.launch.backend == "slurm" and spec.launch.slurm.gres == "npu:8"
    with pytest.raises(ValidationError):
        RunSpec.model_validate({"source": "s", "target": "t", "model_name": "m1", "launch": {"backend": "k8s"}})
    with pytest.raises(ValidationError):  # unknown slurm keys are errors, not silently dropped
        RunSpec.model_validate({"source": "s", "target": "t", "model_name": "m1",
                                "launch": {"slurm": {"partiton": "npu"}}})
    edited = LaunchSettings().with_edits({"backend": "slurm", "slurm.partition": "debug", "nproc_per_node": 4})
    assert (edited.backend, edited.slurm.partition, edited.nproc_per_node) == ("slurm", "debug", 4)
    for bad in ({"slurm.partition": "x;id"}, {"slurm.nope": 1}, {"slurm": {}}, {"backend": "pbs"}):
        with pytest.raises(ValueError):
            LaunchSettings().with_edits(bad)

    from msmigrate.faces.chat.session import parse_edit

    assert parse_edit("backend=slurm slurm.partition=debug slurm.gres=npu:8") == {
        "backend": "slurm", "slurm.partition": "debug", "slurm.gres": "npu:8"}
    assert parse_edit("slurm.partition=a;id").startswith("edit refused")
    assert "cannot be edited" in parse_edit("slurm.env=x")


# ---------------------------------------------------------------- the job script, run under a fake srun/scontrol
def _fake_slurm_bin(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    scripts = {
        # two hosts in the allocation, whatever the compressed list says; nodeA's address is 10.1.2.3
        "scontrol": '#!/bin/bash\n[ "$1 $2" = "show hostnames" ] && printf "nodeA\\nnodeB\\n"\n'
                    '[ "$1 $2 $3" = "show node nodeA" ] && echo "NodeName=nodeA Arch=x86_64 NodeAddr=10.1.2.3 '
                    'NodeHostName=nodeA Version=22.05.8"\nexit 0\n',
        # one task per node, as srun --ntasks-per-node=1 starts them: SLURM_NODEID differs per task
        "srun": '#!/bin/bash\nwhile [[ "$1" == --* ]]; do echo "srun-opt $1" >&2; shift; done\n'
                'for i in $(seq 0 $((SLURM_JOB_NUM_NODES - 1))); do SLURM_NODEID=$i "$@" || exit $?; done\n',
    }
    for name, text in scripts.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


def test_job_script_rendezvous_and_quoting_under_fake_srun(tmp_path):
    pwned = tmp_path / "PWNED"
    nasty = f"a'b \"c\" $(touch {pwned}) `touch {pwned}` ; touch {pwned}\nsecond line"
    probe = ("import json, os, sys; print(json.dumps({k: os.environ.get(k) for k in "
             "('PET_NODE_RANK', 'NODE_RANK', 'PET_MASTER_ADDR', 'PET_MASTER_PORT', 'MASTER_ADDR', 'FOO', 'EXTRA')}"
             " | {'argv': sys.argv[1:], 'cwd': os.getcwd()}))")
    workdir = tmp_path / "tar get"
    workdir.mkdir()
    cmd = Command(argv=[sys.executable, "-c", probe, nasty, "--flag"], env={"FOO": nasty}, cwd=str(workdir),
                  config_path=None, device="cpu")
    spec = LaunchSpec(gate="G6", nnodes=2, backend="slurm")
    script = tmp_path / "job.sh"
    script.write_text(render_script(cmd, spec, SlurmOptions(env={"EXTRA": "x y"}), header="t\nrm -rf /"))
    env = {**os.environ, "PATH": f"{_fake_slurm_bin(tmp_path / 'bin')}:{os.environ['PATH']}",
           "SLURM_JOB_NODELIST": "node[A-B]", "SLURM_JOB_ID": "123", "SLURM_JOB_NUM_NODES": "2"}
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "[msmigrate] slurm job 123 nodes node[A-B] master nodeA (10.1.2.3:20123)"
    ranks = [json.loads(ln) for ln in lines[1:]]
    assert [r["PET_NODE_RANK"] for r in ranks] == ["0", "1"] and [r["NODE_RANK"] for r in ranks] == ["0", "1"]
    assert {r["PET_MASTER_ADDR"] for r in ranks} == {"10.1.2.3"} and {r["PET_MASTER_PORT"] for r in ranks} == {"20123"}
    assert all(r["FOO"] == nasty and r["argv"] == [nasty, "--flag"] and r["EXTRA"] == "x y" for r in ranks)
    assert all(r["cwd"] == str(workdir) for r in ranks)
    assert not pwned.exists()  # nothing quoted was executed
    assert "srun-opt --kill-on-bad-exit=1" in proc.stderr


def test_job_script_sources_cann_only_for_npu_and_when_present(tmp_path):
    present = tmp_path / "set_env.sh"
    present.write_text("export CANN_SOURCED=yes\n")
    opts = SlurmOptions(cann_set_env=[str(present), str(tmp_path / "absent.sh")])
    cmd = Command(argv=["bash", "-c", 'echo "cann=${CANN_SOURCED:-no} hccl=$HCCL_CONNECT_TIMEOUT"'],
                  env={"HCCL_CONNECT_TIMEOUT": "1200"}, cwd=str(tmp_path), config_path=None, device="npu")
    env = {**os.environ, "PATH": f"{_fake_slurm_bin(tmp_path / 'bin')}:{os.environ['PATH']}",
           "SLURM_JOB_NODELIST": "n1", "SLURM_JOB_ID": "5", "SLURM_JOB_NUM_NODES": "1"}
    for device, expect in (("npu", "cann=yes hccl=1200"), ("cpu", "cann=no hccl=1200")):
        cmd.device = device
        (tmp_path / "job.sh").write_text(render_script(cmd, LaunchSpec(gate="G6", master_port=29600), opts,
                                                       header="h"))
        out = subprocess.run(["bash", str(tmp_path / "job.sh")], env=env, capture_output=True, text=True).stdout
        assert out.splitlines()[-1] == expect and "master nodeA (10.1.2.3:29600)" in out


def test_scheduler_command_leaves_rendezvous_to_the_job():
    spec = LaunchSpec(gate="G6", config="c.yaml", nproc=2, nnodes=2, device="npu", backend="slurm")
    kw = dict(target=Path("/t"), runtime_python="/py", config_path=Path("/r/c.yaml"), port=0)
    sched = build_command(spec, "npu", DeviceInfo(kind="npu", count=0), rendezvous_from_env=True, **kw)
    assert "--node_rank" not in sched.argv and "--master_addr" not in sched.argv and "--nnodes" in sched.argv
    local = build_command(LaunchSpec(gate="G6", config="c.yaml", nproc=2), "cpu", DeviceInfo(kind="cpu", count=0),
                          **{**kw, "port": 29500})
    assert local.argv[local.argv.index("--master_port") + 1] == "29500"  # the local shape is unchanged
    a = LaunchSpec(gate="G6")
    assert launch_key("G6", "sha", a, "cpu", "s") != launch_key("G6", "sha", LaunchSpec(gate="G6", backend="slurm"),
                                                                 "cpu", "s")


def test_sbatch_argv_carries_validated_options(tmp_path):
    opts = SlurmOptions(partition="npu", account="mm", gres="npu:8", cpus_per_task=16, exclusive=True)
    spec = LaunchSpec(gate="G6", nnodes=2, timeout_s=900)
    argv = sbatch_argv(tmp_path / "job.sh", name="msm-x", log_path=tmp_path / "train.log", spec=spec, opts=opts)
    assert argv[:2] == ["sbatch", "--parsable"] and argv[-1] == str(tmp_path / "job.sh")
    for flag in ("--nodes=2", "--ntasks-per-node=1", "--partition=npu", "--account=mm", "--gres=npu:8",
                 "--cpus-per-task=16", "--exclusive", "--time=16", "--job-name=msm-x", "--no-requeue"):
        assert flag in argv
    with pytest.raises(ValueError, match="%"):
        sbatch_argv(tmp_path / "job.sh", name="n", log_path=tmp_path / "a%j" / "t.log", spec=spec, opts=opts)


# ---------------------------------------------------------------- job state: recorded outputs, fallbacks, statuses
def test_state_parsing_from_recorded_outputs():
    fields = parse_scontrol_line(SCONTROL_LINE)
    assert fields["JobState"] == "FAILED" and fields["ExitCode"] == "1:0" and fields["NodeList"] == "vm"
    assert [parse_exit_code(t) for t in ("0:0", "1:0", "0:9", "", "garbage")] == [0, 1, 137, None, None]


def _completed(stdout: str = "", rc: int = 0, stderr: str = ""):
    return subprocess.CompletedProcess([], rc, stdout, stderr)


def test_job_info_falls_back_from_sacct_to_scontrol(monkeypatch):
    answers = {
        "squeue": _completed(rc=1, stderr="slurm_load_jobs error: Invalid job id specified"),
        "sacct": _completed(rc=1, stderr="Slurm accounting storage is disabled"),
        "scontrol": _completed(SCONTROL_LINE + "\n"),
    }
    monkeypatch.setattr(slurm_jobs, "_call", lambda argv, timeout=0: answers[argv[0]])
    info = slurm_jobs.job_info("7")
    assert (info.state, info.exit_code, info.nodes, info.source) == ("FAILED", 1, "vm", "scontrol")
    answers["sacct"] = _completed("7|CANCELLED by 0|0:15|node[01-02]|None\n7.batch|CANCELLED|0:15|node01|\n")
    info = slurm_jobs.job_info("7")
    assert (info.state, info.exit_code, info.nodes, info.source) == ("CANCELLED", 143, "node[01-02]", "sacct")
    answers["squeue"] = _completed("RUNNING|node[01-02]|None\n")
    assert slurm_jobs.job_info("7").active


def test_submit_parses_parsable_output_and_refusals(monkeypatch):
    out = iter([_completed("4242;cluster_a\n"), _completed(rc=1, stderr="sbatch: error: invalid partition")])
    monkeypatch.setattr(slurm_jobs, "_call", lambda argv, timeout=0: next(out))
    assert slurm_jobs.submit(["sbatch"]) == "4242"
    with pytest.raises(slurm_jobs.SlurmError, match="invalid partition"):
        slurm_jobs.submit(["sbatch"])


@pytest.mark.parametrize("stop,state,success,expect", [
    (None, "COMPLETED", True, "succeeded"), (None, "COMPLETED", False, "failed"), (None, "FAILED", False, "failed"),
    (None, "TIMEOUT", False, "timeout"), (None, "NODE_FAIL", False, "scheduler_failed"),
    (None, "CANCELLED", False, "cancelled"), ("no_output_timeout", "CANCELLED", False, "no_output_timeout"),
    ("budget_exhausted", "CANCELLED", False, "budget_exhausted"), (None, "UNKNOWN", False, "scheduler_failed"),
])
def test_status_of(stop, state, success, expect):
    outcome = slurm_run.JobOutcome("1", stop, JobInfo("1", state))
    assert slurm_run.status_of(outcome, success) == expect
    assert expect == "succeeded" or expect == "failed" or expect in records.RETRYABLE


def test_device_from_gres():
    opts = lambda g: SlurmOptions(gres=g)  # noqa: E731
    assert slurm_run.device_for(LaunchSpec(gate="G"), opts("npu:8")) == ("npu", None)
    assert slurm_run.device_for(LaunchSpec(gate="G"), opts("gpu:a100:4")) == ("cuda", None)
    assert slurm_run.device_for(LaunchSpec(gate="G", device="cpu"), opts(None)) == ("cpu", None)
    assert "set launch.device" in slurm_run.device_for(LaunchSpec(gate="G"), opts(None))[1]


# ---------------------------------------------------------------- resume: re-attach instead of resubmitting
class AgentKilled(BaseException):
    """Stands for kill -9: the process stops between two journal writes."""


def _script_ctx(tmp_path: Path) -> tuple[RunContext, LaunchSpec]:
    target = tmp_path / "target"
    (target / "examples" / "m").mkdir(parents=True)
    (target / "examples" / "m" / "run.sh").write_text("#!/bin/bash\necho never run here\n")
    ctx = RunContext(run_id="r1", run_dir=tmp_path / "run", source=tmp_path / "src", target=target, model_name="m")
    spec = LaunchSpec(gate="G6", script="examples/m/run.sh", device="cpu", backend="slurm",
                      slurm=SlurmOptions(poll_s=0.01))
    return ctx, spec


class FakeSlurm:
    """sbatch / squeue / scancel in memory; the job 'runs' by writing real-format lines to its log."""

    def __init__(self, monkeypatch, job_id: str = "4242"):
        self.submits, self.cancels, self.job_id, self.polls, self.written = [], [], job_id, 0, 0
        self.kill_on_poll: int | None = None
        self.log: Path | None = None
        monkeypatch.setattr(slurm_jobs, "submit", self.submit)
        monkeypatch.setattr(slurm_jobs, "cancel", lambda job, signal=None: self.cancels.append(job) or True)
        monkeypatch.setattr(slurm_jobs, "job_info", self.info)
        monkeypatch.setattr(slurm_jobs, "find_job", lambda name: self.job_id if self.submits else None)
        monkeypatch.setattr(slurm_run, "LOG_SETTLE_S", 0.0)

    def submit(self, argv):
        self.submits.append(argv)
        self.written = 0
        self.log = Path(next(a for a in argv if a.startswith("--output=")).split("=", 1)[1])
        return self.job_id

    def info(self, job_id):
        self.polls += 1
        if self.kill_on_poll is not None and self.polls >= self.kill_on_poll:
            self.kill_on_poll = None
            raise AgentKilled
        if self.written < 3:
            self.written += 1
            i = self.written
            with open(self.log, "a") as fh:
                fh.write(ITER.format(i=i, n=3, c=2 * i, loss=5.0 - 0.1 * i) + "\n")
            return JobInfo(job_id, "RUNNING", nodes="n[1-2]")
        return JobInfo(job_id, "COMPLETED", nodes="n[1-2]", exit_code=0, source="scontrol")


def _die_on(monkeypatch, event: str) -> None:
    """The next journal write of ``event`` (and every later one) never happens: the agent is gone."""
    real = records.append_event

    def append(run_dir, ev):
        if ev["event"] == event or getattr(append, "dead", False):
            append.dead = True
            raise AgentKilled
        real(run_dir, ev)

    monkeypatch.setattr(records, "append_event", append)


def test_resume_reattaches_to_the_running_job(tmp_path, monkeypatch):
    ctx, spec = _script_ctx(tmp_path)
    fake = FakeSlurm(monkeypatch)
    fake.kill_on_poll = 2  # the agent dies while the job runs
    with monkeypatch.context() as m:
        _die_on(m, "finished")
        with pytest.raises(AgentKilled):
            launch(ctx, spec)
    (rec,) = read_launches(ctx.run_dir)
    assert rec.job_id == "4242" and not rec.finished and len(fake.submits) == 1
    res = launch(ctx, spec)  # the resumed agent asks for the same launch
    assert res.ok, res.error
    assert len(fake.submits) == 1 and res.data["job_id"] == "4242" and res.data["nodes"] == "n[1-2]"
    assert res.data["summary"]["steps"] == 3 and res.data["exit_code"] == 0 and res.data["job_state"] == "COMPLETED"
    events = [json.loads(ln)["event"] for ln in (ctx.run_dir / "launches.jsonl").read_text().splitlines()]
    assert events == ["started", "submitted", "running", "reattached", "running", "finished"]
    assert launch(ctx, spec).data["reused"]  # and once finished, it is reused like any launch


def test_job_submitted_but_never_journaled_is_found_by_name(tmp_path, monkeypatch):
    ctx, spec = _script_ctx(tmp_path)
    fake = FakeSlurm(monkeypatch, job_id="77")
    with monkeypatch.context() as m:
        _die_on(m, "submitted")  # killed between sbatch returning and the job id reaching the disk
        with pytest.raises(AgentKilled):
            launch(ctx, spec)
    assert len(fake.submits) == 1 and read_launches(ctx.run_dir)[0].job_id is None
    res = launch(ctx, spec)
    assert res.ok and len(fake.submits) == 1 and res.data["job_id"] == "77"


def test_other_launches_leave_an_orphan_job_to_its_own_launch(tmp_path, monkeypatch):
    ctx, spec = _script_ctx(tmp_path)
    fake = FakeSlurm(monkeypatch)
    fake.kill_on_poll = 2
    with monkeypatch.context() as m:
        _die_on(m, "finished")
        with pytest.raises(AgentKilled):
            launch(ctx, spec)
    fake.cancels.clear()  # (the simulated death went through follow's handler; a real kill -9 cancels nothing)
    # another launch (another gate) leaves the orphan alone: its own launch re-attaches to it later
    other = LaunchSpec(**{**spec.__dict__, "gate": "G4"})
    assert launch(ctx, other).ok and fake.cancels == [] and len(fake.submits) == 2
    forced = LaunchSpec(**{**spec.__dict__, "force": True})
    assert launch(ctx, forced).data["job_id"] == "4242"  # force still re-attaches to the very same launch's job


# ---------------------------------------------------------------- batch: the scheduler's queue replaces local slots
def _gate_deps(tmp_path: Path, backend: str):
    from types import SimpleNamespace

    spec = RunSpec.model_validate({"source": "s", "target": "t", "model_name": "m1", "launch": {
        "backend": backend, "device": "cpu", "nnodes": 2, "slurm": {"partition": "debug"}}})
    ctx = RunContext(run_id="r", run_dir=tmp_path / "run", source=tmp_path, target=tmp_path, model_name="m1")
    return SimpleNamespace(spec=spec, ctx=ctx, emit=lambda *a, **k: None, idle_s=0.0, stop_requested=lambda: False)


@pytest.mark.parametrize("backend", ["slurm", "local"])
def test_batch_launch_slots_only_for_local_launches(tmp_path, monkeypatch, backend):
    import fcntl

    from msmigrate.agent.routes.fsdp2.gates import training
    from msmigrate.agent.launch_slots import slot_env
    from msmigrate.core.tool_result import ToolResult

    slots = tmp_path / "slots"
    slots.mkdir()
    for k, v in slot_env(slots, 1).items():
        monkeypatch.setenv(k, v)
    held = open(slots / "slot-0.lock", "a+")  # another batch item holds the only local launch slot
    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    seen = []

    def fake_launch(ctx, spec, on_progress=None, cancel=None):
        seen.append(spec)
        return ToolResult(ok=True, data={"summary": {}, "backend": spec.backend, "job_id": "9", "nodes": "n1"})

    monkeypatch.setattr(training, "launch", fake_launch)
    deps, state = _gate_deps(tmp_path, backend), {"plan": {"config_path": "c.yaml"}, "started_at": 1000.0}
    if backend == "local":
        from msmigrate.agent import launch_slots as ls

        monkeypatch.setattr(ls.time, "sleep", lambda s: (_ for _ in ()).throw(TimeoutError("waits for a slot")))
        with pytest.raises(TimeoutError):
            training.run_launch(deps, state, "G4", "single-process", 1, {})
        assert seen == []
        return
    _, ev, _ = training.run_launch(deps, state, "G4", "single-process", 1, {})
    _, ev6, _ = training.run_launch(deps, state, "G6", "2-ranks", 2, {})
    g4, g6 = seen
    assert (g4.backend, g4.nnodes, g6.nnodes, g4.slurm.partition) == ("slurm", 1, 2, "debug")
    assert g4.deadline == 1000.0 + deps.spec.budgets.wall_seconds  # the run's wall budget ends the job
    assert ev["job_id"] == "9" and ev["nodes"] == "n1" and ev["backend"] == "slurm"
    held.close()


def test_wall_budget_deadline_cancels_a_running_job(tmp_path, monkeypatch):
    ctx, spec = _script_ctx(tmp_path)
    fake = FakeSlurm(monkeypatch)
    cancelled = []

    def info(job_id):  # running for ever, until cancelled
        return JobInfo(job_id, "CANCELLED" if cancelled else "RUNNING", nodes="n1", exit_code=0 if cancelled else None)

    monkeypatch.setattr(slurm_jobs, "job_info", info)
    monkeypatch.setattr(slurm_jobs, "cancel", lambda job, signal=None: cancelled.append(job) or True)
    res = launch(ctx, LaunchSpec(**{**spec.__dict__, "deadline": 1.0}))  # the run's wall budget ended long ago
    assert res.data["status"] == "budget_exhausted" and cancelled == ["4242"] and len(fake.submits) == 1


def test_report_lists_the_scheduler_jobs():
    from msmigrate.agent.report import render_report

    ev = {"label": "2-ranks", "command": [], "exit_code": 0, "metrics": {"steps": 5}, "backend": "slurm",
          "job_id": "5", "nodes": "node[01-02]", "job_state": "COMPLETED", "log_excerpt": ""}
    state = {"run_id": "r", "exit_status": "success", "plan": {},
             "gates": {"G6": {"gate": "G6", "passed": True, "summary": "ok", "evidence": [ev]}}}
    text = render_report(state, "(no changes)", has_plot=False)
    assert "## Scheduler jobs" in text and "| G6 2-ranks | 5 | node[01-02] | COMPLETED | 0 |" in text
    local = {**state, "gates": {"G6": {**state["gates"]["G6"], "evidence": [{**ev, "job_id": None}]}}}
    assert "Scheduler jobs" not in render_report(local, "(no changes)", has_plot=False)


def test_a_slow_controller_is_retried_a_lasting_outage_ends_the_launch(tmp_path, monkeypatch):
    ctx, spec = _script_ctx(tmp_path)
    fake = FakeSlurm(monkeypatch)
    real_info, hiccups = fake.info, iter([True, True])

    def flaky(job_id):
        if next(hiccups, False):
            raise slurm_jobs.SlurmError("squeue did not answer within 60s")
        return real_info(job_id)

    monkeypatch.setattr(slurm_jobs, "job_info", flaky)
    assert launch(ctx, spec).ok  # two failed queries in a row are tolerated

    def down(job_id):
        raise slurm_jobs.SlurmError("squeue did not answer within 60s")

    monkeypatch.setattr(slurm_jobs, "job_info", down)
    res = launch(ctx, LaunchSpec(**{**spec.__dict__, "gate": "G4"}))
    assert not res.ok and res.data["status"] == "launcher_error" and "lost contact" in res.error
    assert fake.cancels == [res.data["job_id"]]  # the job is not left running unwatched
    assert read_launches(ctx.run_dir)[-1].status == "launcher_error"


def test_slurm_clients_get_the_child_environment_plus_the_cluster_address(monkeypatch):
    """sbatch exports its environment into the job: it is the runtime children's one (wherever that is narrowed),
    and still names the cluster."""
    monkeypatch.setattr(slurm_jobs, "child_env", lambda: {"PATH": "/usr/bin"})
    monkeypatch.setenv("SLURM_CONF", "/etc/x/slurm.conf")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    env = slurm_jobs.client_env()
    assert env == {"PATH": "/usr/bin", "SLURM_CONF": "/etc/x/slurm.conf"}
