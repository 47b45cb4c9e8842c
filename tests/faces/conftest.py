"""Shared workspace for the faces tests: one tiny source model for the session, a fresh stand-in target per test,
and the environment that points the faces' test hook at the scripted policy and fake gates in ``fake_run.py``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


@pytest.fixture(scope="session")
def source_model(tmp_path_factory) -> Path:
    from msmigrate.testbeds.fixtures import build_source

    return build_source("qwen2_vl", tmp_path_factory.mktemp("faces_src") / "qwen2_vl")


@pytest.fixture()
def standin(tmp_path) -> Path:
    from msmigrate.testbeds.standin import write_standin

    return write_standin(tmp_path / "target", with_assets=False)


@pytest.fixture()
def hook_env() -> dict[str, str]:
    """Environment for subprocesses of the real programs, with the scripted policy + fake gates hook."""
    return {**os.environ, "MSMIGRATE_RUN_HOOK": "fake_run:overrides", "PYTHONPATH": str(HERE),
            "TERM": "dumb", "NO_COLOR": "1", "HF_HUB_OFFLINE": "1", "FAKE_GATE_SLEEP": "0"}


def write_spec(path: Path, source: Path, target: Path, model_name: str = "qwen2_vl") -> Path:
    path.write_text(f"source: {source}\ntarget: {target}\nmodel_name: {model_name}\n")
    return path
