"""The launch journal ``<run_dir>/launches.jsonl``: append-only events, so a resume after kill -9 sees every launch.

Per attempt: ``started`` (written BEFORE spawning), ``spawned`` (pid), ``finished`` (exit code, status, summary).
Slurm launches write ``submitted`` (job id, right after sbatch) and ``running`` (node list) instead of ``spawned``.
A local attempt's ``started`` carries its environment tag and ``processes`` events list each (pid, start time) of
its process tree when first seen (``processes.py``): a resume finds every rank again, not only the process group.
A ``started`` without ``finished`` is an interrupted launch (the agent died mid-run); a ``finished`` one with the same
key is reused instead of relaunched (DESIGN decision 8).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

JOURNAL = "launches.jsonl"
SECRET_KEY = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
PORT_IN_USE = "port_in_use"  # the master port was taken before torchrun bound it (a flake of the host)
# Statuses that say nothing about the code under test; an identical launch may be retried after them.
RETRYABLE = {"timeout", "no_output_timeout", "cancelled", "spawn_failed", "interrupted", "launcher_error",
             "submit_failed", "queue_timeout", "scheduler_failed", "budget_exhausted", PORT_IN_USE}


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def mask_env(env: dict[str, str]) -> dict[str, str]:
    """Values of keys that look like credentials are replaced by ``***``; registered secrets are masked by value."""
    from msmigrate.core.secret_mask import mask_mapping_by_name

    return {k: ("***" if SECRET_KEY.search(k) else v) for k, v in mask_mapping_by_name(env).items()}


def append_event(run_dir: Path, event: dict[str, Any]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    from msmigrate.core.secret_mask import mask_obj

    line = json.dumps(mask_obj({"ts": now(), **event}), default=str, ensure_ascii=False)
    with open(run_dir / JOURNAL, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


@dataclass
class LaunchRecord:
    launch_id: str
    launch_key: str
    attempt: int
    gate: str | None = None
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    config_path: str | None = None
    log_path: str | None = None
    device: str | None = None
    started_at: str | None = None
    pid: int | None = None
    ended_at: str | None = None
    exit_code: int | None = None
    status: str | None = None  # None while running/interrupted; succeeded | failed | stopped_fatal | timeout | ...
    summary: dict[str, Any] | None = None
    backend: str = "local"
    # backend slurm: the job (id journaled by ``submitted`` before it is followed), its allocation and end state
    job_name: str | None = None
    job_id: str | None = None
    nodes: str | None = None
    job_state: str | None = None
    script_path: str | None = None
    # local: the attempt's environment tag and its process tree as journaled (pid, start time)
    tag: str | None = None
    processes: list[list] = field(default_factory=list)
    left_alive: list[int] = field(default_factory=list)  # set by the reaper: pids that outlived SIGKILL

    @property
    def finished(self) -> bool:
        return self.ended_at is not None


def read_launches(run_dir: Path) -> list[LaunchRecord]:
    """All attempts in journal order, events folded per (launch_id, attempt). A torn last line is skipped."""
    path = run_dir / JOURNAL
    if not path.is_file():
        return []
    records: dict[tuple[str, int], LaunchRecord] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue  # a crash mid-write leaves at most one partial line
        key = (ev.get("launch_id"), ev.get("attempt", 1))
        kind = ev.get("event")
        if kind == "started":
            records[key] = LaunchRecord(
                launch_id=ev["launch_id"], launch_key=ev["launch_key"], attempt=ev.get("attempt", 1),
                gate=ev.get("gate"), argv=ev.get("argv", []), env=ev.get("env", {}), cwd=ev.get("cwd"),
                config_path=ev.get("config_path"), log_path=ev.get("log_path"), device=ev.get("device"),
                started_at=ev.get("ts"), backend=ev.get("backend", "local"), job_name=ev.get("job_name"),
                script_path=ev.get("script_path"), tag=ev.get("tag"),
            )
        elif key in records and kind == "spawned":
            records[key].pid = ev.get("pid")
        elif key in records and kind == "processes":
            records[key].processes.extend(ev.get("pids") or [])
        elif key in records and kind in ("submitted", "running"):
            rec = records[key]
            rec.job_id = ev.get("job_id", rec.job_id)
            rec.nodes = ev.get("nodes") or rec.nodes
        elif key in records and kind == "finished":
            rec = records[key]
            rec.ended_at, rec.exit_code = ev.get("ts"), ev.get("exit_code")
            rec.status, rec.summary = ev.get("status"), ev.get("summary")
            rec.nodes, rec.job_state = ev.get("nodes") or rec.nodes, ev.get("job_state")
    return list(records.values())


def find_finished_launch(run_dir: Path, launch_key: str) -> LaunchRecord | None:
    """The latest finished attempt with this key whose outcome is about the code (not a timeout/cancel)."""
    for rec in reversed(read_launches(run_dir)):
        if rec.launch_key == launch_key and rec.finished and rec.status not in RETRYABLE:
            return rec
    return None


def interrupted_launches(run_dir: Path) -> list[LaunchRecord]:
    """Attempts that were started but never finished (the agent or machine died during them)."""
    return [rec for rec in read_launches(run_dir) if not rec.finished]


def next_attempt(run_dir: Path, launch_id: str) -> int:
    return 1 + max((r.attempt for r in read_launches(run_dir) if r.launch_id == launch_id), default=0)
