"""Fixtures that more than one test folder uses: one tiny Qwen2-VL source model per session and a fresh stand-in
target per test.

Helpers shared by test modules live in modules with names unique across tests/ (agent_fakes, run_dirs, attack_kit …),
never in a conftest.py: every conftest is named ``conftest``, so ``from conftest import …`` gets whichever folder's
was loaded first when folders run in one pytest call (tests/test_layout.py checks both rules)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def source_model(tmp_path_factory) -> Path:
    from msmigrate.testbeds.fixtures import build_source

    return build_source("qwen2_vl", tmp_path_factory.mktemp("shared_src") / "qwen2_vl")


@pytest.fixture()
def standin(tmp_path) -> Path:
    from msmigrate.testbeds.standin import write_standin

    return write_standin(tmp_path / "target", with_assets=False)
