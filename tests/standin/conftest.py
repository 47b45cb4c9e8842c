"""Fixtures: one generated stand-in per session, and an in-process import context for its packages."""
import importlib
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from msmigrate.testbeds.standin import write_standin

ENV = {"NON_MEGATRON": "true", "HF_HUB_OFFLINE": "1", "LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": "2",
       "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="session")
def standin(tmp_path_factory) -> Path:
    return write_standin(tmp_path_factory.mktemp("standin") / "MindSpeed-MM")


@pytest.fixture
def mm(standin, monkeypatch):
    """Import the stand-in's modules in-process (cwd = its root); purge them afterwards so registries reset."""
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(standin)
    monkeypatch.syspath_prepend(str(standin))
    _purge()
    yield importlib.import_module
    _purge()


def _purge():
    for name in list(sys.modules):
        if name.split(".")[0] in ("mindspeed", "mindspeed_mm"):
            del sys.modules[name]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def run_py():
    """Fixture form of `_run_py` (test modules here are not importable as a package)."""
    return _run_py


def _run_py(standin: Path, code: str, env=None, timeout=120) -> subprocess.CompletedProcess:
    """Run a Python snippet in a fresh interpreter rooted at the stand-in."""
    full_env = {**os.environ, **ENV, "PYTHONPATH": str(standin), **(env or {})}
    full_env = {k: v for k, v in full_env.items() if v is not None}  # None = unset
    return subprocess.run([sys.executable, "-c", code], cwd=standin, env=full_env, capture_output=True, text=True,
                          timeout=timeout)
