"""The faces tests' environment that points the faces' test hook at the scripted policy and fake gates in
``fake_run.py`` (the source model and stand-in target fixtures are tests/conftest.py's)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


@pytest.fixture()
def hook_env() -> dict[str, str]:
    """Environment for subprocesses of the real programs, with the scripted policy + fake gates hook."""
    return {**os.environ, "MSMIGRATE_RUN_HOOK": "fake_run:overrides", "PYTHONPATH": str(HERE),
            "TERM": "dumb", "NO_COLOR": "1", "HF_HUB_OFFLINE": "1"}

