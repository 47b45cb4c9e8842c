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


# Parallel runs (pytest-xdist, `-n 2 --dist loadgroup`, what scripts/test.sh runs). Each worker is its own process
# with its own basetemp (tmp_path_factory gives basetemp/popen-gwN), and every port a test binds comes from the OS,
# so tests need no locking between workers. What must stay together is marked with an xdist_group below.
XDIST_GROUPS = {
    # one real Slurm (munged, slurmctld, two slurmd) for tests/slurm: its package fixture starts it once per worker
    "slurm": lambda item: item.get_closest_marker("slurm") is not None,
    # one ~50 s rules run asserted on by two files: on one worker it is launched once
    "hostile_rules_run": lambda item: "hostile_rules_run" in getattr(item, "fixturenames", ()),
}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        for group, wanted in XDIST_GROUPS.items():
            if wanted(item):
                item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(optionalhook=True)  # only a hook when pytest-xdist is installed
def pytest_xdist_make_scheduler(config, log):
    """With ``--dist loadgroup``: a work unit is an xdist_group, or else a whole test file (xdist's loadgroup
    would hand out ungrouped tests one by one, so a module-scoped fixture — a torchrun run several tests assert
    on — would run once per worker)."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class FileOrGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):
                return nodeid.split("@")[-1]
            return nodeid.split("::", 1)[0]

    return FileOrGroupScheduling(config, log)
