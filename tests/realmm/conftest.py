"""Tests against the real MindSpeed-MM (marker ``realmm``). The snapshots (MindSpeed-MM.tar.gz, MindSpeed.tar.gz)
are found through $MSMIGRATE_REALMM_DIR or a ``shared/realmm`` folder next to or above the checkout; without them
every test here skips, saying so. The real runtime (torch 2.7.1 + transformers 4.57) comes from
$MSMIGRATE_REAL_RUNTIME (a venv; scripts/test.sh builds one with scripts/real_target.sh)."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def snapshot_dir() -> Path | None:
    env = os.environ.get("MSMIGRATE_REALMM_DIR")
    # next to the checkout or up to two levels above it (a worktree sits deeper); a shallow checkout such as
    # /work/main has fewer ancestors, so take only the ones that exist
    candidates = [Path(env)] if env else [up / "shared" / "realmm" for up in list(REPO.parents)[:3]]
    for cand in candidates:
        if (cand / "MindSpeed-MM.tar.gz").is_file() and (cand / "MindSpeed.tar.gz").is_file():
            return cand
    return None


@pytest.fixture(scope="session")
def realmm_tarballs() -> Path:
    """The folder holding the two snapshot tarballs (or a skip saying where they are looked for)."""
    snap = snapshot_dir()
    if snap is None:
        pytest.skip("real MindSpeed-MM snapshots not found (set MSMIGRATE_REALMM_DIR to the folder holding "
                    "MindSpeed-MM.tar.gz and MindSpeed.tar.gz)")
    return snap


@pytest.fixture(scope="session")
def real_checkout(tmp_path_factory, realmm_tarballs, real_runtime) -> Path:
    """One real checkout (git repo, mindspeed importable) built by scripts/real_target.sh, shared read-only by
    the verify and validator tests (migrations get their own)."""
    from realmm_helpers import real_target

    printed = real_target(tmp_path_factory.mktemp("real_target"), realmm_tarballs, real_runtime)
    return Path(printed["target"])


@pytest.fixture(scope="session")
def realmm_snapshot(tmp_path_factory) -> Path:
    """The two snapshots unpacked (read-only use): <dir>/MindSpeed-MM, <dir>/MindSpeed."""
    snap = snapshot_dir()
    if snap is None:
        pytest.skip("real MindSpeed-MM snapshots not found (set MSMIGRATE_REALMM_DIR to the folder holding "
                    "MindSpeed-MM.tar.gz and MindSpeed.tar.gz)")
    out = tmp_path_factory.mktemp("realmm")
    for name in ("MindSpeed-MM", "MindSpeed"):
        with tarfile.open(snap / f"{name}.tar.gz") as tar:
            tar.extractall(out, filter="data")
    return out


@pytest.fixture(scope="session")
def real_runtime() -> str:
    """The real runtime's python (torch 2.7.1 + transformers 4.57), or a skip saying how to build one."""
    venv = os.environ.get("MSMIGRATE_REAL_RUNTIME")
    python = Path(venv) / "bin" / "python" if venv else None
    if python is None or not python.is_file():
        pytest.skip("no real runtime: build one with `bash scripts/real_target.sh DEST --runtime VENV` and set "
                    "MSMIGRATE_REAL_RUNTIME=VENV")
    probe = subprocess.run([str(python), "-c", "import torch, transformers; print(torch.__version__, "
                            "transformers.__version__)"], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0 or not probe.stdout.startswith("2.7"):
        pytest.skip(f"MSMIGRATE_REAL_RUNTIME={venv} is not a torch 2.7 runtime: {probe.stdout or probe.stderr[-300:]}")
    return str(python)
