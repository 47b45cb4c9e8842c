"""The Slurm client side: submit (``sbatch --parsable``), read a job's state (``squeue``, then ``sacct``, then
``scontrol show job``), find a job by name, cancel (``scancel``). Every call is an argv list with a timeout.

State reading order: ``squeue`` answers for jobs the controller still holds; once a job has left the queue its end
state and exit code come from the accounting database (``sacct``), and on clusters without accounting
(``AccountingStorageType=accounting_storage/none``) from ``scontrol show job``, which keeps finished jobs for
``MinJobAge`` seconds. A job none of the three knows is ``UNKNOWN``."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

from msmigrate.tools.runtime import child_env

CALL_TIMEOUT_S = 60.0
ACTIVE_STATES = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
                 "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"}
# End states that say nothing about the code under test (the launch may be retried after them).
SCHEDULER_FAILURES = {"NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
JOB_ID_RE = re.compile(r"\d+(_\d+)?(\+\d+)?")
SCHEDULER_ENV_PREFIXES = ("SLURM_CONF", "SLURM_CLUSTERS", "SBATCH_", "SQUEUE_", "SACCT_", "SCANCEL_", "MUNGE")


class SlurmError(RuntimeError):
    """A Slurm command failed in a way the launch cannot go on from (not installed, controller down)."""


@dataclass
class JobInfo:
    job_id: str
    state: str  # PENDING | RUNNING | COMPLETED | FAILED | CANCELLED | TIMEOUT | ... | UNKNOWN
    nodes: str | None = None  # the allocation's node list, compressed Slurm form ("node[01-04]")
    exit_code: int | None = None  # batch script exit status (128 + signal when killed by one)
    reason: str | None = None  # pending reason / failure reason
    source: str = "squeue"  # which command answered

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def known(self) -> bool:
        return self.state != "UNKNOWN"


def client_env() -> dict[str, str]:
    """The environment of Slurm client calls. sbatch exports its own environment into the job (``--export=ALL``), so
    it is the target-runtime children's environment (``child_env``, the one place that is decided), plus the
    variables that tell the clients which cluster to talk to (``SLURM_CONF``, ``SBATCH_*``, munge's socket)."""
    scheduler = {k: v for k, v in os.environ.items() if k.startswith(SCHEDULER_ENV_PREFIXES)}
    return {**child_env(), **scheduler}


def _call(argv: list[str], timeout: float = CALL_TIMEOUT_S) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                              env=client_env())
    except FileNotFoundError as exc:
        raise SlurmError(f"{argv[0]} not found: is Slurm installed on this host? ({exc})") from exc
    except subprocess.TimeoutExpired as exc:
        raise SlurmError(f"{' '.join(argv[:2])} did not answer within {timeout:.0f}s") from exc


def submit(sbatch_argv: list[str]) -> str:
    """Run ``sbatch --parsable …``; returns the job id. A refusal (bad partition, no such account) raises
    ``SlurmError`` with sbatch's own message."""
    proc = _call(sbatch_argv)
    out = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not out:
        raise SlurmError(f"sbatch failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()}")
    job_id = out[-1].split(";")[0].strip()  # --parsable prints "<id>" or "<id>;<cluster>"
    if not JOB_ID_RE.fullmatch(job_id):
        raise SlurmError(f"sbatch printed no job id: {proc.stdout.strip()!r}")
    return job_id


def cancel(job_id: str, signal: str | None = None) -> bool:
    argv = ["scancel", *([f"--signal={signal}"] if signal else []), job_id]
    return _call(argv).returncode == 0


def find_job(name: str) -> str | None:
    """Id of the newest queued/running job named ``name`` (a launch whose id never reached the journal)."""
    proc = _call(["squeue", "-h", "--name", name, "-o", "%i"])
    ids = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()] if proc.returncode == 0 else []
    return sorted(ids, key=lambda i: int(re.match(r"\d+", i).group()))[-1] if ids else None


def job_info(job_id: str) -> JobInfo:
    """Current state; for a job that has ended, its end state and exit code (sacct, else scontrol)."""
    info = _squeue(job_id)
    if info.active:
        return info
    final = _sacct(job_id)
    if not final.known:
        final = _scontrol(job_id)
    if not final.known:
        return info
    final.nodes = final.nodes or info.nodes
    return final


def _squeue(job_id: str) -> JobInfo:
    proc = _call(["squeue", "-h", "-j", job_id, "--states=all", "-o", "%T|%N|%r"])
    line = next((ln for ln in proc.stdout.splitlines() if ln.strip()), "") if proc.returncode == 0 else ""
    if not line:  # "Invalid job id specified" once the controller has purged it
        return JobInfo(job_id, "UNKNOWN", source="squeue")
    state, nodes, reason = (line.split("|") + ["", ""])[:3]
    return JobInfo(job_id, state.strip(), nodes=nodes.strip() or None, reason=_none(reason), source="squeue")


def _sacct(job_id: str) -> JobInfo:
    """The job allocation's line (``-X``) from accounting; UNKNOWN without accounting (sacct exits non-zero)."""
    proc = _call(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "JobID,State,ExitCode,NodeList,Reason"])
    if proc.returncode != 0:
        return JobInfo(job_id, "UNKNOWN", source="sacct")
    for line in proc.stdout.splitlines():
        parts = (line.split("|") + [""] * 5)[:5]
        if parts[0].strip() == job_id:
            return JobInfo(job_id, parts[1].split()[0] if parts[1].strip() else "UNKNOWN", nodes=_none(parts[3]),
                           exit_code=parse_exit_code(parts[2]), reason=_none(parts[4]), source="sacct")
    return JobInfo(job_id, "UNKNOWN", source="sacct")


def _scontrol(job_id: str) -> JobInfo:
    proc = _call(["scontrol", "show", "job", "-o", job_id])
    if proc.returncode != 0 or "JobState=" not in proc.stdout:
        return JobInfo(job_id, "UNKNOWN", source="scontrol")
    fields = parse_scontrol_line(proc.stdout.strip().splitlines()[0])
    return JobInfo(job_id, fields.get("JobState", "UNKNOWN"), nodes=_none(fields.get("NodeList")),
                   exit_code=parse_exit_code(fields.get("ExitCode", "")), reason=_none(fields.get("Reason")),
                   source="scontrol")


def parse_scontrol_line(line: str) -> dict[str, str]:
    """``scontrol show job -o`` → {key: value}. Values never contain spaces except the last keys' (Command,
    WorkDir, paths), which only matter as a whole; a key starts at a word followed by '='."""
    fields: dict[str, str] = {}
    for match in re.finditer(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=(\S*)", line):
        fields.setdefault(match.group(1), match.group(2))
    return fields


def parse_exit_code(text: str) -> int | None:
    """Slurm's ``<exit>:<signal>`` → the shell's convention (exit status, or 128 + signal when killed)."""
    m = re.fullmatch(r"\s*(\d+):(\d+)\s*", text or "")
    if not m:
        return None
    code, sig = int(m.group(1)), int(m.group(2))
    return 128 + sig if sig else code


def _none(text: str | None) -> str | None:
    text = (text or "").strip()
    return None if text in ("", "None", "(null)", "(None)") else text
