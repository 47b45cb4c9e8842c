"""The delivered launch script run through the real shell up to its launcher, the launcher itself shadowed by a
recorder: what torchrun would be handed (argv), from where (cwd) and with what environment — what the shell makes of
the script's quoting, ``cd`` and variables, which no reading of its lines can decide.

The script runs with ``bash`` in a shadow of the target checkout: the target's folders re-made, every file a symbolic
link to the target's own (the script reads real files), so that what the script writes (``mkdir -p logs``, a ``tee``
log, a ``cd`` into a folder followed by writes) lands in the shadow and never in the checkout. The shadow's root
stands for the checkout's root, the folder the framework's examples are run from. On ``PATH`` first: ``torchrun``,
and ``python`` / ``python3`` that record a ``-m torch.distributed.run`` (or ``.launch``) call and run every other
call with the real interpreter. A recorded launcher exits 0 without starting anything, so the script goes on to
its end (a script that reads the training log afterwards finds none; its exit status is not judged). Commands that
reach outside the shadow are never run (``OUTWARD``: package managers — a real MindSpeed-MM example script runs
``pip install transformers==5.2.0``, which would replace the library in the first interpreter on PATH —, network,
remote hosts, job schedulers, privileges, signals; ``python -m pip`` too), and ``rm`` removes only paths inside the
shadow. What is left runs for real with this user's rights, the shadow as its cwd: a write through a linked file
(``cat >> existing.yaml``) would reach the checkout's file — a delivered launch script has none.

What comes back (``DryRun``): every launcher call (its argv after the launcher, its cwd relative to the shadow's
root — ``None`` when outside it — and the variables the script set or changed against the environment it was given),
the script's exit status and the tail of its stderr. No launcher call recorded means the script stopped before its
launcher on this machine (a ``set -e`` and a toolkit file only an accelerator host has, a launcher this recorder does
not shadow): nothing about the launch is concluded from that.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from msmigrate.tools.subprocess_env import child_env

DRY_RUN_TIMEOUT_S = 60.0
BACKGROUND_GRACE_S = 5.0  # how long what the script left running in the background may take to end on its own
MAX_SHADOW_ENTRIES = 50_000  # a checkout bigger than this is not shadowed (the dry run reports it did not run)
SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", "node_modules", ".mypy_cache", ".pytest_cache"}
MODULE_LAUNCHERS = ("torch.distributed.run", "torch.distributed.launch")

# one recorder for every shadowed name: argv NUL-separated, the cwd, the environment NUL-separated
_RECORDER = """#!/bin/bash
n=$(mktemp "$MSMIGRATE_DRY_RUN_DIR/call.XXXXXX")
printf '%s' "{launcher}" > "$n.launcher"
printf '%s\\0' "$@" > "$n.argv"
pwd > "$n.cwd"
env -0 > "$n.env"
exit 0
"""
# commands that reach outside the shadow (packages, network, remote hosts, job schedulers, privileges): never run by
# a dry run — a real example script pip-installs another transformers into whatever interpreter is first on PATH
OUTWARD = ("pip", "pip3", "uv", "conda", "mamba", "apt", "apt-get", "yum", "wget", "curl", "git", "ssh", "scp",
           "rsync", "sudo", "su", "srun", "sbatch", "salloc", "scancel", "mpirun", "mpiexec", "docker", "kill",
           "pkill", "killall", "reboot", "shutdown")
_NOOP = "#!/bin/bash\nexit 0\n"
# rm: only what lies inside the shadow (a relative ``rm -rf ckpt``); an absolute path outside it is left alone
_RM = """#!/bin/bash
args=()
for a in "$@"; do
  case "$a" in
    -*) args+=("$a");;
    *) p=$(realpath -m -- "$a"); case "$p" in "$MSMIGRATE_DRY_RUN_ROOT"/*) args+=("$a");; esac;;
  esac
done
exec "{real}" "${args[@]}"
"""
# python / python3: a module launcher is recorded, pip does nothing, anything else is the real interpreter's
_PYTHON = """#!/bin/bash
if [ "$1" = "-m" ]; then
  case "$2" in
    pip|pip3|ensurepip) exit 0;;
    {modules})
      launcher="$2"; shift 2
      n=$(mktemp "$MSMIGRATE_DRY_RUN_DIR/call.XXXXXX")
      printf '%s' "python -m $launcher" > "$n.launcher"
      printf '%s\\0' "$@" > "$n.argv"
      pwd > "$n.cwd"
      env -0 > "$n.env"
      exit 0;;
  esac
fi
exec "{real}" "$@"
"""


@dataclass
class LauncherCall:
    launcher: str  # torchrun | python -m torch.distributed.run ...
    argv: list[str]  # what the launcher was handed, after its own name
    cwd: str | None  # relative to the checkout's root ('.' for the root); None: outside the checkout
    set_env: dict[str, str] = field(default_factory=dict)  # what the script set or changed


@dataclass
class DryRun:
    calls: list[LauncherCall] = field(default_factory=list)
    returncode: int | None = None
    stderr_tail: str = ""
    error: str | None = None  # the dry run itself could not run (no bash, a checkout too big, a timeout)


def _shadow(root: Path, into: Path) -> int:
    """``into`` made a shadow of ``root``: its folders re-made, its files linked; -> entries made (0: too many)."""
    count = 0
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not os.path.islink(os.path.join(here, d))]
        rel = Path(here).relative_to(root)
        (into / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            os.symlink(os.path.join(here, name), into / rel / name)
        count += len(files) + len(dirs)
        if count > MAX_SHADOW_ENTRIES:
            return 0
    return count


def _real_python(path: str) -> str | None:
    return shutil.which("python3", path=path) or shutil.which("python", path=path)


def _recorders(bindir: Path, real_python: str | None, real_rm: str | None) -> None:
    bindir.mkdir()
    (bindir / "torchrun").write_text(_RECORDER.replace("{launcher}", "torchrun"))
    for name in OUTWARD:
        (bindir / name).write_text(_NOOP)
    (bindir / "rm").write_text(_RM.replace("{real}", real_rm) if real_rm else _NOOP)
    if real_python:
        text = _PYTHON.replace("{modules}", "|".join(MODULE_LAUNCHERS)).replace("{real}", real_python)
        for name in ("python", "python3"):
            (bindir / name).write_text(text)
    for p in bindir.iterdir():
        p.chmod(0o755)


def _env(raw: bytes) -> dict[str, str]:
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.decode("utf-8", "replace").partition("=")
        if sep and key:
            out[key] = value
    return out


def _calls(rec_dir: Path, shadow: Path, given: dict[str, str]) -> list[LauncherCall]:
    calls = []
    for argv_file in sorted(rec_dir.glob("call.*.argv"), key=lambda p: p.stat().st_mtime_ns):
        stem = str(argv_file)[: -len(".argv")]
        raw = argv_file.read_bytes()
        argv = [a.decode("utf-8", "replace") for a in raw.split(b"\0")[:-1]]
        cwd_text = Path(stem + ".cwd").read_text(errors="replace").strip()
        try:
            cwd = Path(cwd_text).resolve().relative_to(shadow.resolve()).as_posix() or "."
        except ValueError:
            cwd = None
        env = _env(Path(stem + ".env").read_bytes())
        skip = {"PATH", "PWD", "OLDPWD", "SHLVL", "_", "MSMIGRATE_DRY_RUN_DIR", "MSMIGRATE_DRY_RUN_ROOT"}
        set_env = {k: v for k, v in env.items() if k not in skip and given.get(k) != v}
        calls.append(LauncherCall(Path(stem + ".launcher").read_text(errors="replace"), argv, cwd, set_env))
    return calls


def dry_run(script: Path, root: Path, *, timeout: float = DRY_RUN_TIMEOUT_S, text: str | None = None) -> DryRun:
    """``script`` (a file of the checkout ``root``) run by bash from the shadow's root, its launcher recorded;
    ``text``: run this text in the script's place instead (a repair tried before it is written)."""
    script, root = Path(script), Path(root)
    bash = shutil.which("bash")
    if bash is None:
        return DryRun(error="no bash on this machine")
    try:
        rel = script.resolve().relative_to(root.resolve())
    except ValueError:
        return DryRun(error=f"{script} is not a file of {root}")
    with tempfile.TemporaryDirectory(prefix="msmigrate-dry-run-") as tmp:
        shadow, rec_dir, bindir = Path(tmp) / "checkout", Path(tmp) / "calls", Path(tmp) / "bin"
        rec_dir.mkdir()
        if not _shadow(root, shadow):
            return DryRun(error=f"{root} has more than {MAX_SHADOW_ENTRIES} entries: not shadowed")
        # the script itself as a copy, so that nothing it does to its own file reaches the checkout
        (shadow / rel).unlink(missing_ok=True)
        if text is None:
            shutil.copyfile(script, shadow / rel)
        else:
            (shadow / rel).write_text(text, encoding="utf-8")
        env = child_env({})
        path = env.get("PATH", os.defpath)
        _recorders(bindir, _real_python(path), shutil.which("rm", path=path))
        given = dict(env)
        env["PATH"] = f"{bindir}{os.pathsep}{path}"
        env["MSMIGRATE_DRY_RUN_DIR"] = str(rec_dir)
        env["MSMIGRATE_DRY_RUN_ROOT"] = str(shadow.resolve())
        proc = subprocess.Popen([bash, rel.as_posix()], cwd=shadow, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _drain(proc.pid, 0.0)
            proc.communicate()
            return DryRun(calls=_calls(rec_dir, shadow, given), error=f"the script ran past {timeout:.0f} s")
        # what the script started in the background (`nohup torchrun … &`) outlives it: let it finish writing its
        # record (a recorder exits at once), then end what is left, before the shadow is read and removed
        _drain(proc.pid, BACKGROUND_GRACE_S)
        return DryRun(calls=_calls(rec_dir, shadow, given), returncode=proc.returncode,
                      stderr_tail=stderr.decode("utf-8", "replace")[-2000:])


def _drain(group: int, grace: float) -> None:
    """Wait up to ``grace`` seconds for the processes of the script's session (its process group) to end, then kill
    what is left."""
    deadline = time.monotonic() + grace
    while True:
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    time.sleep(0.1)  # the kernel reaps them; their open files in the shadow close
