"""Shared by the realmm tests: a fresh real checkout (scripts/real_target.sh with the cached runtime) and a source
fixture written by the real runtime's transformers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "real_target.sh"


def real_target(dest: Path, snapshots: Path, runtime_python: str) -> dict[str, str]:
    """Run scripts/real_target.sh DEST with the runtime venv of ``runtime_python``; returns its printed paths."""
    venv = Path(runtime_python).parent.parent
    proc = subprocess.run(["bash", str(SCRIPT), str(dest), "--snapshots", str(snapshots), "--runtime", str(venv)],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    printed = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.startswith(("target ", "runtime_python ")))
    printed["stdout"] = proc.stdout
    return printed


def source_for_runtime(name: str, dest: Path, runtime_python: str) -> Path:
    proc = subprocess.run([sys.executable, "-m", "msmigrate.faces.cli", "fixtures", "source", name, str(dest),
                           "--for-runtime", runtime_python], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dest


def msmigrate(*args: str, timeout: float = 2400) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msmigrate.faces.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})


def megatron_target(dest: Path, snapshots: Path, runtime_python: str) -> dict[str, str]:
    """scripts/real_target.sh DEST --megatron with the runtime venv of ``runtime_python``: its printed paths."""
    venv = Path(runtime_python).parent.parent
    proc = subprocess.run(["bash", str(SCRIPT), str(dest), "--snapshots", str(snapshots), "--runtime", str(venv),
                           "--megatron"], capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.startswith(("target ", "runtime_python ")))
