"""Fixtures of the attack suite (helpers in attack_kit.py): a git target, a source folder, and a run context
attached to its own worktree."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from attack_kit import make_checkout  # noqa: E402

from msmigrate.core.run_context import RunContext  # noqa: E402
from msmigrate.tools.worktree import attach  # noqa: E402


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    return make_checkout(tmp_path / "mm")


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    src = tmp_path / "src_model"
    src.mkdir()
    (src / "config.json").write_text("{}")
    return src


@pytest.fixture()
def ctx(checkout: Path, source: Path, tmp_path: Path) -> RunContext:
    c = RunContext(run_id="attack", run_dir=tmp_path / "run", source=source, target=checkout, model_name="tiny")
    attach(c)
    return c
