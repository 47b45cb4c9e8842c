"""The Slurm backend of a launch: write the job script, submit it, journal the job id at once, then follow the job's
state and its log until it ends; cancel it (``scancel``) on timeout, silence, a fatal log pattern, a cancel request,
the run's budget deadline or an exception in this process (Ctrl-C included).

Durability: the job id is journaled (``submitted``, fsync'd) before following starts. An agent killed -9 while the
job runs leaves a ``started`` + ``submitted`` attempt without ``finished``; the next identical launch re-attaches to
that job (``follow`` from the start of its log) instead of submitting again. A kill between ``sbatch`` and the
journal write is covered by the job name, which is unique per run/launch/attempt (``find_job``)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from msmigrate.tools.launcher import records, slurm_jobs
from msmigrate.tools.launcher.command import LaunchSpec
from msmigrate.tools.launcher.slurm_jobs import JobInfo, SlurmError
from msmigrate.tools.launcher.slurm_options import SlurmOptions
from msmigrate.tools.log_parser import LogWatcher

CANCEL_WAIT_S = 60.0  # after scancel, how long to wait for the job to leave the running states
LOG_SETTLE_S = 2.0  # after the job ends, the last lines may reach a shared file system a little later
UNKNOWN_GRACE_S = 30.0  # a job just submitted may not be visible to squeue yet
QUERY_FAILURES = 5  # consecutive failed state queries before the launch gives up (and cancels the job)


def device_for(spec: LaunchSpec, opts: SlurmOptions) -> tuple[str, str | None]:
    """The device of a scheduler launch. The submit host's own devices say nothing about the compute nodes', so
    ``auto`` is read from the GRES the job asks for (npu → npu, gpu → cuda); without one it must be explicit."""
    if spec.device != "auto":
        return spec.device, None
    names = {part.split(":")[0].lower() for part in (opts.gres or "").split(",") if part}
    if "npu" in names:
        return "npu", None
    if "gpu" in names:
        return "cuda", None
    return "cpu", ("launch.device is auto but the Slurm job asks for no npu/gpu GRES: set launch.device "
                   "(npu, cuda or cpu) or launch.slurm.gres")


@dataclass
class JobOutcome:
    job_id: str | None
    stop_reason: str | None  # set when msmigrate ended the job (timeout, cancelled, ...)
    info: JobInfo | None  # the job's last known state
    error: str | None = None  # submission failed / Slurm unreachable


class _Tail:
    """New lines of a file that another process is writing; the last partial line only once the writer is done."""

    def __init__(self, path: Path):
        self.path, self.offset, self.partial = path, 0, ""

    def read(self, final: bool = False) -> list[str]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        text = self.partial + chunk.decode("utf-8", errors="replace")
        lines = text.splitlines(keepends=True)
        self.partial = lines.pop() if lines and not lines[-1].endswith("\n") and not final else ""
        return lines


def submit(script: Path, sbatch_argv: list[str], run_dir: Path, base_event: dict[str, Any]) -> tuple[str | None,
                                                                                                        str | None]:
    """(job id, error). The ``submitted`` event is on disk before this returns."""
    try:
        job_id = slurm_jobs.submit(sbatch_argv)
    except SlurmError as exc:
        return None, str(exc)
    records.append_event(run_dir, {"event": "submitted", **base_event, "job_id": job_id, "script_path": str(script)})
    return job_id, None


def follow(job_id: str, log_path: Path, spec: LaunchSpec, opts: SlurmOptions, watcher: LogWatcher, *,
           run_dir: Path, base_event: dict[str, Any], cancel=None,
           sleep: Callable[[float], Any] = time.sleep) -> JobOutcome:
    """Follow ``job_id`` until it ends, feeding its log to ``watcher``. Any exception (Ctrl-C) cancels the job."""
    try:
        return _follow(job_id, log_path, spec, opts, watcher, run_dir, base_event, cancel, sleep)
    except BaseException:
        _cancel_quietly(job_id)
        raise


def _follow(job_id, log_path, spec, opts, watcher, run_dir, base_event, cancel, sleep) -> JobOutcome:
    tail = _Tail(log_path)
    begun = time.monotonic()
    running_since = last_output = fatal_at = stopped_at = None
    stop_reason: str | None = None
    failures = 0
    while True:
        try:
            info = slurm_jobs.job_info(job_id)
            failures = 0
        except SlurmError:  # a busy controller answers late now and then; a lasting outage ends the launch
            failures += 1
            if failures >= QUERY_FAILURES:
                raise
            sleep(opts.poll_s)
            continue
        now = time.monotonic()
        for line in tail.read():
            last_output = now
            watcher.feed(line)
        if running_since is None and info.state not in ("PENDING", "CONFIGURING", "UNKNOWN"):
            running_since = last_output = now
            records.append_event(run_dir, {"event": "running", **base_event, "job_id": job_id, "nodes": info.nodes,
                                           "job_state": info.state})
        if not info.active and not (info.state == "UNKNOWN" and now - begun < UNKNOWN_GRACE_S):
            sleep(LOG_SETTLE_S)
            for line in tail.read(final=True):
                watcher.feed(line)
            return JobOutcome(job_id, stop_reason, info)
        if spec.stop_on_fatal and watcher.fatal is not None and fatal_at is None:
            fatal_at = now  # give torchrun fatal_grace_s to print its failure summary before the job is cancelled
        if stop_reason is None:
            fatal_due = fatal_at is not None and now - fatal_at > spec.fatal_grace_s
            stop_reason = _stop_reason(spec, opts, cancel, now, begun, running_since, last_output, fatal_due)
            if stop_reason is not None:
                records.append_event(run_dir, {"event": "cancelling", **base_event, "job_id": job_id,
                                               "reason": stop_reason})
                slurm_jobs.cancel(job_id)
                stopped_at = now
        elif now - stopped_at > CANCEL_WAIT_S:
            slurm_jobs.cancel(job_id, signal="KILL")
            stopped_at = now
        sleep(opts.poll_s)


def _stop_reason(spec: LaunchSpec, opts: SlurmOptions, cancel, now: float, begun: float,
                 running_since: float | None, last_output: float | None, fatal_due: bool) -> str | None:
    if cancel is not None and cancel.is_set():
        return "cancelled"
    if spec.deadline is not None and time.time() > spec.deadline:
        return "budget_exhausted"
    if running_since is None:
        return "queue_timeout" if now - begun > opts.queue_timeout_s else None
    if now - running_since > spec.timeout_s:
        return "timeout"
    if now - (last_output or running_since) > spec.no_output_timeout_s:
        return "no_output_timeout"
    if fatal_due:
        return "stopped_fatal"
    return None


def status_of(outcome: JobOutcome, success: bool) -> str:
    """The journal status of a finished job: msmigrate's stop reason, else what the scheduler and the log say."""
    if outcome.error:
        return "submit_failed"
    if outcome.stop_reason:
        return outcome.stop_reason
    state = outcome.info.state if outcome.info else "UNKNOWN"
    if state == "COMPLETED":
        return "succeeded" if success else "failed"
    if state == "TIMEOUT":
        return "timeout"
    if state == "CANCELLED":
        return "cancelled"  # by someone else (scancel by the user, an admin)
    if state in slurm_jobs.SCHEDULER_FAILURES or state == "UNKNOWN":
        return "scheduler_failed"
    return "failed"  # FAILED, OUT_OF_MEMORY: the code's failure, read from the log


def live_job(rec: records.LaunchRecord, run_dir: Path) -> str | None:
    """The job of an interrupted attempt if Slurm still knows it (running, pending, or ended but not yet
    forgotten), else None. A job whose id never reached the journal is looked up by its unique name."""
    job_id = rec.job_id
    if job_id is None and rec.job_name:
        job_id = slurm_jobs.find_job(rec.job_name)
        if job_id is not None:
            records.append_event(run_dir, {"event": "submitted", "launch_id": rec.launch_id, "attempt": rec.attempt,
                                           "job_id": job_id, "recovered_by_name": True})
    if job_id is None:
        return None
    return job_id if slurm_jobs.job_info(job_id).known else None


def _cancel_quietly(job_id: str) -> None:
    try:
        slurm_jobs.cancel(job_id)
    except SlurmError:
        pass  # already failing: the job's --time limit still ends it
