"""Run one training launch: journal it, stream its log, watch it, stop it, summarise it.

The job runs as its own process group (``start_new_session``) so that a wall-clock timeout, a silent hang, a fatal
pattern in the log (after a grace period that lets torchrun print its failure summary) or a cancel kills every rank.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

import yaml

from msmigrate.core.git import git
from msmigrate.core.tool_result import ToolResult
from msmigrate.core.run_context import RunContext
from msmigrate.tools.launcher import processes, records
from msmigrate.tools.launcher.command import (
    Command, LaunchSpec, build_command, deep_merge, device_overrides, expand_dotted, free_port, launch_key,
)
from msmigrate.tools.launcher import slurm_jobs, slurm_run
from msmigrate.tools.launcher.device import DeviceInfo, detect_device, resolve_device
from msmigrate.tools.launcher.slurm_jobs import SlurmError
from msmigrate.tools.launcher.slurm_options import SlurmOptions
from msmigrate.tools.launcher.slurm_script import job_name, render_script, sbatch_argv
from msmigrate.tools.log_parser import IterationRecord, LogWatcher
from msmigrate.tools.runtime import kill_group
from msmigrate.tools.subprocess_env import spawn, unsupervised_argv

GATE_NAME = re.compile(r"G[0-9](-[a-z0-9][a-z0-9-]{0,39})?")  # "G4", "G5-save": a name, never a path
# a launch script the model may name: a relative path under examples/, plain components, ending in .sh
SCRIPT_PATH = re.compile(r"examples/(?:[A-Za-z0-9_][A-Za-z0-9_.-]*/)+[A-Za-z0-9_][A-Za-z0-9_.-]*\.sh")
SPAWN_FAILED_MARK = "msmigrate supervisor: cannot start"  # printed by tools/supervise.py
TERM_GRACE_S = 5.0  # SIGTERM first (torchrun forwards it to the ranks), SIGKILL after this
DRAIN_AFTER_EXIT_S = 5.0  # after the main process exits, leftovers still holding the log pipe are killed
BACKENDS = ("local", "slurm")
PORT_IN_USE = records.PORT_IN_USE
PORT_RETRIES = 1  # relaunches on a fresh port after a collision (a second collision in a row is reported)
# torch c10d's TCPStore server when the master port is taken (errno 98)
PORT_IN_USE_LINE = re.compile(r"EADDRINUSE|(?i:address already in use)|failed to listen on any local network address")


def target_state(target: Path) -> str:
    """Code identity of the target: git HEAD plus a hash of uncommitted changes to tracked files ("nogit" outside
    git). Untracked files are left out on purpose: runs write logs/checkpoints/caches into the checkout, and every
    accepted edit of the agent is a commit (file_writer), so HEAD already names the code under test."""
    head = git(target, "rev-parse", "HEAD", check=False)
    if head.returncode != 0:
        return "nogit"
    dirty = git(target, "status", "--porcelain", "--untracked-files=no", check=False)
    diff = git(target, "diff", "HEAD", check=False)
    extra = hashlib.sha256((dirty.stdout + diff.stdout).encode()).hexdigest()[:16] if dirty.stdout.strip() else ""
    return head.stdout.strip() + (f"+{extra}" if extra else "")


def reap_interrupted(run_dir: Path, keep: tuple[str, int] | None = None,
                     slurm_key: str | None = None) -> list[records.LaunchRecord]:
    """Close the journal entries of launches whose agent died mid-run (kill -9, reboot).

    The job may still be alive (normally its supervisor stopped it when the agent died; this is the second net).
    Every process of a local attempt is found and ended (``processes``): those carrying the attempt's environment
    tag, those journaled in its process tree (same start time, so a recycled pid is left alone), and the members of
    its process group when the recorded leader still runs the recorded argv or is gone while members remain —
    torchrun's ranks live in sessions of their own, so the group alone would miss them. A Slurm job still queued or
    running is cancelled. Each such attempt gets a ``finished`` event with status ``interrupted`` (retryable),
    naming the pids it ended; pids that outlived SIGKILL are kept in ``rec.left_alive`` (the caller must not
    relaunch next to them).
    ``keep`` = (launch_id, attempt) of a Slurm attempt the caller re-attaches to instead. With ``slurm_key`` only
    the Slurm attempts of that launch are reaped: the orphaned jobs of other launches are left to the launches that
    re-attach to them (a resumed run asks for them again), or end at their own ``--time`` limit."""
    reaped = []
    for rec in records.interrupted_launches(run_dir):
        if keep is not None and (rec.launch_id, rec.attempt) == keep:
            continue
        if rec.backend == "slurm" and slurm_key is not None and rec.launch_key != slurm_key:
            continue
        note, extra = None, {}
        if rec.backend == "slurm":
            note = _cancel_orphan_job(rec)
        else:
            group = group_members(rec.pid) if rec.pid is not None and _group_is_ours(rec.pid, rec.argv) else []
            ended, left = processes.end(processes.find(rec.tag, rec.processes, group))
            rec.left_alive = left
            extra = {"ended_pids": ended, **({"left_alive": left} if left else {})}
        records.append_event(run_dir, {"event": "finished", "launch_id": rec.launch_id, "attempt": rec.attempt,
                                       "exit_code": None, "status": "interrupted", "summary": None,
                                       "job_id": rec.job_id, **extra, **({"note": note} if note else {})})
        reaped.append(rec)
    return reaped


def _cancel_orphan_job(rec: records.LaunchRecord) -> str | None:
    try:
        job_id = rec.job_id or (slurm_jobs.find_job(rec.job_name) if rec.job_name else None)
        if job_id is not None and slurm_jobs.job_info(job_id).active:
            slurm_jobs.cancel(job_id)
            return f"cancelled slurm job {job_id}"
    except SlurmError as exc:
        return f"could not reach Slurm to cancel the job: {exc}"
    return None


def _group_is_ours(pgid: int, argv: list[str]) -> bool:
    """The recorded pid led the job's process group. If it still runs, it must run the recorded argv (a recycled
    pid is left alone). If it is gone but members of its group remain (the leader was killed, the ranks were not),
    the group is ours: Linux does not hand out a pid that is still in use as a process group id."""
    if Path(f"/proc/{pgid}").exists():
        return _runs_argv(pgid, argv)
    return bool(group_members(pgid))


def group_members(pgid: int) -> list[int]:
    """Pids whose process group is ``pgid`` (from /proc/<pid>/stat)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp ...
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(entry.name))
    return out


def _runs_argv(pid: int, argv: list[str]) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return unsupervised_argv([part.decode(errors="replace") for part in cmdline if part]) == argv


def _resolve_config(ctx: RunContext, config: str) -> Path | None:
    path = Path(config)
    path = path if path.is_absolute() else ctx.target / path
    return path if path.is_file() else None


def launch(
    ctx: RunContext,
    spec: LaunchSpec,
    on_progress: Callable[[IterationRecord], None] | None = None,
    *,
    device_info: DeviceInfo | None = None,
    cancel: threading.Event | None = None,
) -> ToolResult:
    """Launch ``spec`` in the target runtime (or reuse an identical finished launch) and return its parsed result.

    ``spec.backend`` local: torchrun on this host. slurm: an sbatch job (``slurm_run``); an identical launch whose
    agent died while its job ran re-attaches to that job instead of submitting again."""
    if spec.backend not in BACKENDS:
        return ToolResult.failure(f"unknown launch backend {spec.backend!r}; use {' or '.join(BACKENDS)}")
    if not GATE_NAME.fullmatch(str(spec.gate)):  # the gate names a directory under the run dir: never a path
        return ToolResult.failure(f"gate {spec.gate!r} is not a gate name (G0..G9, optionally -label)")
    if spec.script and not SCRIPT_PATH.fullmatch(spec.script):
        return ToolResult.failure(f"script {spec.script!r} must be an existing examples/<model>/<name>.sh of the target")
    if spec.script and spec.overrides:
        return ToolResult.failure("overrides apply to trainer launches only; a launch script runs its own YAML")
    if not spec.script and not spec.config:
        return ToolResult.failure("a trainer launch needs `config` (a YAML under the target)")
    if spec.nproc < 1 or spec.nnodes < 1:
        return ToolResult.failure("nproc and nnodes must be >= 1")
    slurm = spec.slurm or SlurmOptions() if spec.backend == "slurm" else None
    if slurm is not None:
        device, error = slurm_run.device_for(spec, slurm)
        device_info = DeviceInfo(kind=device, count=0)  # the nodes' devices: CANN is sourced by the job script
    else:
        if device_info is None:
            device_info = DeviceInfo(kind="cpu", count=0) if spec.device == "cpu" else detect_device(
                ctx.runtime_python, ctx.target
            )
        device, error = resolve_device(spec.device, device_info)
    if error:
        return ToolResult.failure(error, device=device_info.kind)

    config_text, config_sha = None, None
    if not spec.script:
        base = _resolve_config(ctx, spec.config)
        if base is None:
            return ToolResult.failure(f"config not found: {spec.config} (relative to {ctx.target})")
        try:
            data = yaml.safe_load(base.read_text()) or {}
            merged = deep_merge(deep_merge(data, device_overrides(device, spec, data)), expand_dotted(spec.overrides))
        except (yaml.YAMLError, ValueError, AttributeError, TypeError) as exc:
            return ToolResult.failure(f"cannot build the run YAML from {base}: {exc}")
        config_text = yaml.safe_dump(merged, sort_keys=False, allow_unicode=True)
        config_sha = hashlib.sha256(config_text.encode()).hexdigest()

    key = launch_key(spec.gate, config_sha, spec, device, target_state(ctx.target))
    launch_id = f"{spec.gate.lower()}-{key[:12]}"
    done = None if spec.force else records.find_finished_launch(ctx.run_dir, key)
    attach = _attachable(ctx.run_dir, key) if slurm is not None and done is None else None
    # a previous agent died mid-launch: make sure its job is gone first (unless it is the job re-attached to)
    reaped = reap_interrupted(ctx.run_dir, keep=(attach[0].launch_id, attach[0].attempt) if attach else None,
                              slurm_key=key)
    left = sorted({pid for rec in reaped for pid in rec.left_alive})
    if left:  # never two trainings in one checkpoint folder
        return ToolResult.failure(f"processes of an interrupted launch outlived SIGKILL (pids {left}); not launching "
                                  "next to them — end them, then resume", status="interrupted", left_alive=left)
    if done is not None:
        return _result(done, reused=True)
    if attach is not None:
        return _reattach(ctx, *attach, spec, slurm, on_progress, cancel)

    launch_dir = ctx.run_dir / "launches" / launch_id
    launch_dir.mkdir(parents=True, exist_ok=True)
    config_path = None
    if config_text is not None:
        config_path = launch_dir / "config.yaml"
        config_path.write_text(config_text)
    warnings = list(device_info.warnings)
    if spec.script and device == "cpu":
        warnings.append("a launch script runs the vanilla trainer, which has no CPU path; use a trainer launch "
                        "(config) for CPU preflight")
    attempt_args = (ctx, spec, device, device_info, key, config_sha, launch_dir, config_path, warnings)
    if slurm is not None:  # the port is chosen in the job (port 0 unused)
        return _local_or_submitted(*attempt_args, spec.master_port or 0, on_progress, cancel, slurm)
    # The launcher picks the port (unless the spec fixes one); another process can take it between the pick and
    # torchrun's bind. That is a flake of this host, not a verdict on the code: one relaunch on a fresh port.
    # Several nodes must agree on the port, so a multi-node launch is not re-pointed.
    fresh_ports = spec.master_port is None and spec.nnodes == 1
    port = spec.master_port or free_port()
    collided: list[int] = []
    while True:
        result = _local_or_submitted(*attempt_args, port, on_progress, cancel, None)
        if result.data.get("status") != PORT_IN_USE or not fresh_ports or len(collided) >= PORT_RETRIES:
            if result.data.get("status") == PORT_IN_USE:
                collided.append(port)
            if collided:
                result.data["port_collisions"] = collided
            return result
        collided.append(port)
        port = free_port()
        warnings.append(f"master port {collided[-1]} was taken before torchrun bound it (address already in use): "
                        f"relaunched on port {port}")


def port_in_use(log_path: Path, steps: int | None) -> bool:
    """Did the launch fail at its rendezvous because the master port was taken? Only a launch that never reached an
    iteration counts (a collision happens before training starts), read from the head of its log."""
    if steps or not log_path.is_file():
        return False
    with open(log_path, encoding="utf-8", errors="replace") as log:
        return PORT_IN_USE_LINE.search(log.read(200_000)) is not None


def _local_or_submitted(ctx: RunContext, spec: LaunchSpec, device: str, device_info: DeviceInfo, key: str,
                        config_sha: str | None, launch_dir: Path, config_path: Path | None, warnings: list[str],
                        port: int, on_progress, cancel, slurm: SlurmOptions | None) -> ToolResult:
    """One attempt of the launch: journal ``started``, run (or submit) it, journal ``finished``."""
    launch_id = launch_dir.name
    attempt = records.next_attempt(ctx.run_dir, launch_id)
    log_path = launch_dir / ("train.log" if attempt == 1 else f"train.attempt{attempt}.log")
    try:
        cmd = build_command(spec, device, device_info, target=ctx.target, runtime_python=ctx.runtime_python,
                            config_path=config_path, port=port, rendezvous_from_env=slurm is not None)
    except ValueError as exc:
        return ToolResult.failure(str(exc))
    base_event = {"launch_id": launch_id, "attempt": attempt}
    started = {
        "event": "started", **base_event, "launch_key": key, "gate": spec.gate, "argv": cmd.argv,
        "env": records.mask_env(cmd.env), "cwd": cmd.cwd, "config_path": cmd.config_path, "config_sha256": config_sha,
        "log_path": str(log_path),
        "device": device,
    }
    if slurm is None:  # every process of this attempt inherits the tag: a resume finds its ranks by it
        started["tag"] = processes.new_tag()
    if slurm is not None:
        return _submit(ctx, spec, slurm, cmd, started, launch_dir, log_path, on_progress, cancel, warnings)
    records.append_event(ctx.run_dir, started)
    try:
        status, exit_code, watcher = _run(cmd, spec, log_path, ctx.run_dir, base_event, on_progress, cancel,
                                          started["tag"])
    except BaseException as exc:  # a bug in a callback, Ctrl-C: the job is already killed; journal it, re-raise
        records.append_event(ctx.run_dir, {
            "event": "finished", **base_event, "exit_code": None, "status": "launcher_error", "error": repr(exc),
        })
        raise
    summary = watcher.summary(exit_code)
    if status is None:
        status = "succeeded" if summary.success else "failed"
    if status in ("failed", "stopped_fatal") and port_in_use(log_path, summary.steps):
        status = PORT_IN_USE
    return _finish(ctx, base_event, launch_dir, status, exit_code, summary, warnings)


def _finish(ctx: RunContext, base_event: dict[str, Any], launch_dir: Path, status: str, exit_code: int | None,
            summary: Any, warnings: list[str], **extra: Any) -> ToolResult:
    attempt = base_event["attempt"]
    # the full summary (with the whole, decimated loss curve) next to the log, for plots and evidence
    (launch_dir / ("summary.json" if attempt == 1 else f"summary.attempt{attempt}.json")).write_text(
        json.dumps(summary.to_dict(), indent=1, default=str))
    records.append_event(ctx.run_dir, {
        "event": "finished", **base_event, "exit_code": exit_code, "status": status, "summary": summary.to_dict(),
        **extra,
    })
    rec = next(r for r in reversed(records.read_launches(ctx.run_dir))
               if r.launch_id == base_event["launch_id"] and r.attempt == attempt)
    result = _result(rec, reused=False)
    result.data["warnings"] = warnings
    return result


# ------------------------------------------------------------------------------------------------ slurm backend
def _run_key(run_dir: Path) -> str:
    return hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()


def _submit(ctx: RunContext, spec: LaunchSpec, opts: SlurmOptions, cmd: Command, started: dict[str, Any],
            launch_dir: Path, log_path: Path, on_progress, cancel, warnings: list[str]) -> ToolResult:
    base_event = {"launch_id": started["launch_id"], "attempt": started["attempt"]}
    attempt = base_event["attempt"]
    name = job_name(_run_key(ctx.run_dir), started["launch_id"], attempt)
    script = launch_dir / ("job.sh" if attempt == 1 else f"job.attempt{attempt}.sh")
    try:
        text = render_script(cmd, spec, opts, header=f"launch {started['launch_id']} attempt {attempt} "
                                                     f"(gate {spec.gate}) of run {ctx.run_id}")
        argv = sbatch_argv(script, name=name, log_path=log_path, spec=spec, opts=opts)
    except ValueError as exc:
        return ToolResult.failure(str(exc))
    script.write_text(text)
    script.chmod(0o700)
    records.append_event(ctx.run_dir, {**started, "backend": "slurm", "job_name": name, "script_path": str(script),
                                       "sbatch_argv": argv})
    job_id, error = slurm_run.submit(script, argv, ctx.run_dir, base_event)
    if error:
        watcher = LogWatcher()
        watcher.feed(error)
        result = _finish(ctx, base_event, launch_dir, "submit_failed", None, watcher.summary(None), warnings,
                         error=error)
        result.error = f"launch submit_failed: {error}"
        return result
    return _follow_job(ctx, job_id, log_path, spec, opts, base_event, launch_dir, on_progress, cancel, warnings)


def _attachable(run_dir: Path, key: str) -> tuple[records.LaunchRecord, str] | None:
    """An interrupted Slurm attempt of this very launch whose job Slurm still knows: (record, job id)."""
    for rec in reversed(records.interrupted_launches(run_dir)):
        if rec.backend == "slurm" and rec.launch_key == key:
            try:
                job_id = slurm_run.live_job(rec, run_dir)
            except SlurmError:
                return None
            return (rec, job_id) if job_id else None
    return None


def _reattach(ctx: RunContext, rec: records.LaunchRecord, job_id: str, spec: LaunchSpec, opts: SlurmOptions,
              on_progress, cancel) -> ToolResult:
    base_event = {"launch_id": rec.launch_id, "attempt": rec.attempt}
    records.append_event(ctx.run_dir, {"event": "reattached", **base_event, "job_id": job_id})
    launch_dir = Path(rec.log_path).parent
    return _follow_job(ctx, job_id, Path(rec.log_path), spec, opts, base_event, launch_dir, on_progress, cancel,
                       [f"re-attached to slurm job {job_id} of an interrupted agent"], reattached=True)


def _follow_job(ctx: RunContext, job_id: str, log_path: Path, spec: LaunchSpec, opts: SlurmOptions,
                base_event: dict[str, Any], launch_dir: Path, on_progress, cancel, warnings: list[str],
                reattached: bool = False) -> ToolResult:
    watcher = LogWatcher(on_iteration=on_progress)
    try:
        outcome = slurm_run.follow(job_id, log_path, spec, opts, watcher, run_dir=ctx.run_dir,
                                   base_event=base_event, cancel=cancel)
    except SlurmError as exc:  # Slurm stopped answering: follow() has asked scancel (best effort); retryable
        records.append_event(ctx.run_dir, {"event": "finished", **base_event, "exit_code": None, "job_id": job_id,
                                           "status": "launcher_error", "error": str(exc)})
        return ToolResult.failure(f"lost contact with Slurm while following job {job_id}: {exc}",
                                  status="launcher_error", job_id=job_id)
    except BaseException as exc:  # Ctrl-C, a bug in a callback: follow() has cancelled the job; journal, re-raise
        records.append_event(ctx.run_dir, {"event": "finished", **base_event, "exit_code": None, "job_id": job_id,
                                           "status": "launcher_error", "error": repr(exc)})
        raise
    info = outcome.info
    exit_code = info.exit_code if info else None
    summary = watcher.summary(exit_code)
    status = slurm_run.status_of(outcome, summary.success)
    return _finish(ctx, base_event, launch_dir, status, exit_code, summary, warnings, job_id=job_id,
                   nodes=info.nodes if info else None, job_state=info.state if info else None,
                   job_info_source=info.source if info else None, reattached=reattached)


def _run(
    cmd: Command, spec: LaunchSpec, log_path: Path, run_dir: Path, base_event: dict[str, Any], on_progress, cancel,
    tag: str,
) -> tuple[str | None, int | None, LogWatcher]:
    """Spawn, stream and watch. Returns (status set by a stop reason or None, exit code, watcher)."""
    watcher = LogWatcher(on_iteration=on_progress)
    with open(log_path, "w", encoding="utf-8") as log:
        try:
            # scrubbed env, own process group under the supervisor: the whole job stops if the agent dies
            proc = spawn(cmd.argv, env_extra={**cmd.env, processes.TAG_ENV: tag}, cwd=cmd.cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        except OSError as exc:
            log.write(f"spawn failed: {exc}\n")
            watcher.feed(f"spawn failed: {exc}")
            return "spawn_failed", None, watcher
        records.append_event(run_dir, {"event": "spawned", **base_event, "pid": proc.pid})
        tree = processes.TreeRecorder(proc.pid)

        def record_tree() -> None:  # journal each new process of the launch (ranks included) when first seen
            fresh = tree.new()
            if fresh:
                records.append_event(run_dir, {"event": "processes", **base_event, "pids": fresh})
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
        reader.start()
        try:
            stop_reason = _watch(proc, lines, log, watcher, spec, cancel, record_tree, tag)
        except BaseException:
            _stop_group(proc, tag)
            raise
        exit_code = proc.wait()
    if stop_reason is None and exit_code == 127 and SPAWN_FAILED_MARK in log_path.read_text(errors="replace")[:2000]:
        stop_reason = "spawn_failed"  # the supervisor could not exec the command (missing runtime python, say)
    return stop_reason, exit_code, watcher


def _watch(proc, lines: queue.Queue, log, watcher: LogWatcher, spec: LaunchSpec, cancel,
           on_tick: Callable[[], None] = lambda: None, tag: str | None = None) -> str | None:
    """Copy output to the log and the watcher until EOF; stop the group on timeout/silence/fatal/cancel.
    ``on_tick`` runs on every pass (the process-tree journal)."""
    start = last_output = time.monotonic()
    stop_reason, fatal_at, exited_at = None, None, None
    while True:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            line = ""
        if line is None:  # EOF: every writer of the pipe is gone
            break
        now = time.monotonic()
        on_tick()
        if line:
            last_output = now
            log.write(line)
            log.flush()
            watcher.feed(line)
        if proc.poll() is not None:
            exited_at = exited_at or now
            if now - exited_at > DRAIN_AFTER_EXIT_S:  # a background child keeps the pipe open: end it
                kill_group(proc.pid)
                break
        if stop_reason is None:
            if cancel is not None and cancel.is_set():
                stop_reason = "cancelled"
            elif now - start > spec.timeout_s:
                stop_reason = "timeout"
            elif now - last_output > spec.no_output_timeout_s:
                stop_reason = "no_output_timeout"
            elif spec.stop_on_fatal and watcher.fatal is not None:
                fatal_at = fatal_at or now
                if now - fatal_at > spec.fatal_grace_s:
                    stop_reason = "stopped_fatal"
            if stop_reason is not None:
                log.write(f"[msmigrate] stopping launch: {stop_reason}\n")
                _stop_group(proc, tag)
    return stop_reason


def _pump(stream, out: queue.Queue) -> None:
    for raw in iter(stream.readline, b""):
        out.put(raw.decode("utf-8", errors="replace"))
    stream.close()
    out.put(None)


def _stop_group(proc: subprocess.Popen, tag: str | None = None) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    else:
        try:
            proc.wait(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        kill_group(proc.pid)  # also reaps grandchildren that ignored SIGTERM
    if tag:  # ranks in sessions of their own that torchrun did not take down with it
        processes.end(processes.find(tag), grace_s=1.0)


def _summary_path(rec: records.LaunchRecord) -> str | None:
    if not rec.log_path:
        return None
    name = "summary.json" if rec.attempt == 1 else f"summary.attempt{rec.attempt}.json"
    path = Path(rec.log_path).with_name(name)
    return str(path) if path.is_file() else None


def _result(rec: records.LaunchRecord, reused: bool) -> ToolResult:
    summary: dict[str, Any] = dict(rec.summary or {})
    curve = summary.pop("loss_curve", [])
    summary["loss_curve_head"], summary["loss_curve_tail"] = curve[:10], curve[-10:]  # full curve: summary_path
    data = {
        "launch_id": rec.launch_id, "launch_key": rec.launch_key, "attempt": rec.attempt, "reused": reused,
        "status": rec.status, "exit_code": rec.exit_code, "device": rec.device, "argv": rec.argv, "env": rec.env,
        "config_path": rec.config_path, "log_path": rec.log_path, "started_at": rec.started_at,
        "summary_path": _summary_path(rec),
        "ended_at": rec.ended_at, "pid": rec.pid, "summary": summary,
    }
    if rec.backend != "local":
        data.update(backend=rec.backend, job_id=rec.job_id, job_name=rec.job_name, nodes=rec.nodes,
                    job_state=rec.job_state, script_path=rec.script_path)
    if rec.status == "succeeded":
        return ToolResult(ok=True, data=data)
    sig = summary.get("failure_signature") or {}
    return ToolResult(ok=False, data=data, error=f"launch {rec.status}: {sig.get('line') or 'no failure line found'}")
