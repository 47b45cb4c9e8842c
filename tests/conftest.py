"""Fixtures that more than one test folder uses: one tiny Qwen2-VL source model per session, a fresh stand-in
target per test, and one real rules-policy run on a hostile source per session (asserted on by the attack suite and
the rules end-to-end tests).

Helpers shared by test modules live in modules with names unique across tests/ (agent_fakes, run_dirs, attack_kit …),
never in a conftest.py: every conftest is named ``conftest``, so ``from conftest import …`` gets whichever folder's
was loaded first when folders run in one pytest call (tests/test_layout.py checks both rules)."""

from __future__ import annotations

import sys
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


@pytest.fixture(scope="session")
def hostile_rules_run(tmp_path_factory):
    """One real ``msmigrate run`` (rules policy, real torchrun gates) on the qwen2_vl fixture carrying prompt
    injections, with canary secrets in its environment. Several tests assert different things about the same run
    (nothing secret leaks; branch A goes green with parity), so it is launched once: ~50 s on 2 cores."""
    security = str(Path(__file__).resolve().parent / "security")
    if security not in sys.path:  # the hostile source and the run live with the attack suite's helpers
        sys.path.insert(0, security)
    from attack_kit import run_rules_on_hostile_source

    return run_rules_on_hostile_source(tmp_path_factory.mktemp("hostile_rules_run"))
