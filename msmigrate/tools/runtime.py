"""Run code in the *target runtime* Python (DESIGN decision 3): the agent's own process never imports torch,
transformers or the target's code. Every child gets its own process group so a timeout kills the whole tree.

Probes run in a forked child of the warm runtime (``warm_runtime``: torch and transformers imported once per run)
when it is safe, else as fresh processes; each result says which (``runtime_mode``) and, when cold, why."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from msmigrate.core.tool_result import ToolResult
from msmigrate.tools import subprocess_env, warm_runtime
from msmigrate.tools.subprocess_env import spawn

PROBES_DIR = Path(__file__).parent / "probes"
# A probe prints its JSON result on one line starting with this marker; everything else it prints is log.
RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "
# The spec setting that bounds a probe's wall clock: a timed-out probe names it, so the report and the failure
# classifier (knowledge/failures/probe-timeout.md) send the user to the limit, not to the model's code.
PROBE_TIMEOUT_SETTING = "launch.probe_timeout_s"


@dataclass
class ProcessOutcome:
    argv: list[str]
    returncode: int | None  # None when killed on timeout
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool


def run_process(
    argv: list[str],
    *,
    cwd: Path | str | None = None,
    env_extra: dict[str, str] | None = None,
    timeout: float = 300.0,
) -> ProcessOutcome:
    """Run argv (never a shell string) in a new session with the allow-listed environment (``subprocess_env``);
    on timeout kill the whole process group; the child dies with the agent (parent-death signal)."""
    start = time.monotonic()
    proc = spawn(argv, env_extra=env_extra, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                 stdin=subprocess.DEVNULL, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return ProcessOutcome(argv, proc.returncode, out, err, time.monotonic() - start, False)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        out, err = proc.communicate()
        return ProcessOutcome(argv, None, out, err, time.monotonic() - start, True)


def executable_problem(python: str) -> str | None:
    """None when ``python`` names an executable file (a path, or a name found on PATH); else one line saying so."""
    if not python.strip():
        return "runtime_python is empty: name the target runtime's Python interpreter"
    found = python if os.sep in python else shutil.which(python)
    if found is None or not Path(found).exists():
        return f"runtime_python: no such interpreter: {python}"
    if not Path(found).is_file() or not os.access(found, os.X_OK):
        return f"runtime_python {python} is not an executable file"
    return None


# What a signal that ended a probe says of the host or the runtime (a negative exit status is the signal's number)
SIGNAL_MEANING = {
    "SIGILL": "an illegal instruction: the runtime's compiled code (torch or another binary package) uses a CPU "
              "instruction this host's CPU lacks (a build for AVX-512 / newer CPUs): the host and runtime, not the "
              "migration; install a build for this CPU or run on a host that has the instruction",
    "SIGKILL": "killed from outside (the host's out-of-memory killer or a resource limit): the host, not the migration",
    "SIGBUS": "a bus error: a mapped file or shared-memory segment the host could not back (a full /dev/shm)",
    "SIGSEGV": "a segmentation fault in compiled code of the runtime (a broken or mismatched binary package)",
    "SIGABRT": "aborted by compiled code of the runtime itself (a native library's assertion, or a library that "
               "refuses to initialise next to another copy of itself): the runtime, not the migration",
}
_SAID_ERROR = re.compile(r"(?i)\berror\b|\bfatal\b|\babort|\bfault\b|not found|cannot|failed|terminat")
LAST_LINES = 12  # the lines a dying native library prints: its error first, then hints


def last_error_line(stderr: str, limit: int = 240) -> str:
    """The first line that says an error among the last lines of a dead process's stderr (else its last line): what
    a process a signal ended printed of why before it died — a native library's message comes first, its hints
    after it."""
    lines = [ln.strip() for ln in (stderr or "").splitlines() if ln.strip()][-LAST_LINES:]
    said = next((ln for ln in lines if _SAID_ERROR.search(ln)), lines[-1] if lines else "")
    return said[:limit]


def ended_without_result(name: str, returncode: int, stderr: str = "") -> str:
    """``<name> exited N without a result``; for a process a signal ended, the signal's name and what it says of the
    host or the runtime (a probe killed by SIGILL before it printed anything is the host's CPU, not the code), and
    the last error line it printed before it died (``stderr``)."""
    said = last_error_line(stderr) if returncode < 0 else ""
    return _ended(name, returncode) + (f"; its last error line: {said}" if said else "")


def _ended(name: str, returncode: int) -> str:
    try:
        sig = signal.Signals(-returncode).name if returncode < 0 else None
    except ValueError:
        sig = None
    if sig is None:
        return f"{name} exited {returncode} without a result"
    meaning = SIGNAL_MEANING.get(sig)
    return f"{name} was killed by {sig} (exit {returncode}) without a result" + (f": {meaning}" if meaning else "")


PYTHON_SIGNATURE = "MSMIGRATE_PYTHON"


def interpreter_problem(python: str, timeout: float = 60.0) -> str | None:
    """None when ``python`` exists and runs as a Python 3 interpreter (it is run once, with the allow-listed
    environment, to print its version); else one line naming it — before a probe's exit 127 would."""
    problem = executable_problem(python)
    if problem:
        return problem
    code = f"import sys; print('{PYTHON_SIGNATURE}', *sys.version_info[:2])"
    outcome = run_process([python, "-c", code], timeout=timeout)
    words = next((ln.split() for ln in outcome.stdout.splitlines() if ln.startswith(PYTHON_SIGNATURE)), None)
    if outcome.returncode == 0 and words and len(words) == 3 and words[1] == "3":
        return None
    said = " ".join((outcome.stderr or outcome.stdout).split())[:160]
    how = "timed out" if outcome.timed_out else f"exit {outcome.returncode}"
    return f"runtime_python {python} is not a Python 3 interpreter ({how}{': ' + said if said else ''})"


def child_env(env_extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every target-runtime child, fresh or forked: the allow-list (``subprocess_env``)."""
    return subprocess_env.child_env(env_extra)


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_probe(
    runtime_python: str,
    probe: str,
    args: list[str] | None = None,
    *,
    cwd: Path | str | None = None,
    env_extra: dict[str, str] | None = None,
    timeout: float = 300.0,
    probes_dir: Path | None = None,
) -> ToolResult:
    """Run ``probes/<probe>.py`` in the target runtime and return its JSON result.

    Expected failures (non-zero exit, no result line, timeout) come back as ``ok=False`` with the tail of stderr, so
    the policy can read the real error message."""
    script = (probes_dir or PROBES_DIR) / f"{probe}.py"
    if not script.is_file():
        raise FileNotFoundError(f"unknown probe {probe!r}")  # a bug, not an expected failure
    argv = [runtime_python, str(script), *(args or [])]
    mode, reason = "warm", None
    try:
        warm, _ = warm_runtime.POOL.run(runtime_python, str(script), list(args or []), str(cwd or os.getcwd()),
                                           child_env(env_extra), timeout)
        outcome = ProcessOutcome(argv, warm.returncode, warm.stdout, warm.stderr, warm.seconds, warm.timed_out)
    except warm_runtime.Cold as exc:
        mode, reason = "cold", str(exc)
        outcome = run_process(argv, cwd=cwd, env_extra=env_extra, timeout=timeout)
    # The marker may follow text the probed code left on the line without a newline (transformers' unanswered
    # "Do you wish to run the custom code? [y/N] " prompt does): the result is what follows the marker's last copy.
    result_lines = [ln[ln.rindex(RESULT_MARKER):] for ln in outcome.stdout.splitlines() if RESULT_MARKER in ln]
    base = {"argv": outcome.argv, "returncode": outcome.returncode, "seconds": round(outcome.seconds, 2),
            "runtime_mode": mode, **({"runtime_reason": reason} if reason else {})}
    if outcome.timed_out:
        return ToolResult.failure(
            f"probe {probe} timed out after {timeout:.0f}s (the runtime probes' time limit; raise "
            f"{PROBE_TIMEOUT_SETTING} in the spec for a large source or a slow host)",
            **base, stderr_tail=outcome.stderr[-4000:])
    if not result_lines:
        return ToolResult.failure(
            ended_without_result(f"probe {probe}", outcome.returncode, outcome.stderr), **base,
            stderr_tail=outcome.stderr[-4000:]
        )
    payload = json.loads(result_lines[-1][len(RESULT_MARKER) :])
    if outcome.returncode != 0 or payload.get("error"):
        return ToolResult.failure(
            payload.get("error") or f"probe {probe} exited {outcome.returncode}",
            **base,
            result=payload,
            stderr_tail=outcome.stderr[-4000:],
        )
    return ToolResult(ok=True, data={**base, "result": payload})


def save_probe_output(run_dir: Path | None, name: str, res: ToolResult) -> tuple[dict, str | None]:
    """(the probe's JSON result, where it was saved): kept under ``<run_dir>/probes/<name>.json`` as evidence the
    plan rests on (the failure and its data when the probe failed)."""
    raw = (res.data.get("result") or {}) if res.data else {}
    if run_dir is None:
        return raw, None
    out = Path(run_dir) / "probes"
    out.mkdir(parents=True, exist_ok=True)
    saved = out / f"{name}.json"
    saved.write_text(json.dumps(raw or {"error": res.error, **res.data}, indent=1, default=str))
    return raw, str(saved)


def emit_result(payload: dict) -> None:
    """Used *inside* probe scripts (they run in the target runtime and import nothing from msmigrate but this
    tiny function's copy — probes are standalone files, so they re-define it; kept here as the reference)."""
    print(RESULT_MARKER + json.dumps(payload, default=str), flush=True)
