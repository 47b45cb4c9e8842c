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

from suite_tiers import long_reason


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


# Parallel runs (pytest-xdist: `-n 2 --dist loadfile`, what scripts/test.sh runs). Each worker is its own process
# with its own basetemp (tmp_path_factory gives basetemp/popen-gwN), and every port a test binds comes from the OS,
# so tests need no locking between workers. A work unit is one test file (its module-scoped fixtures, often a
# torchrun run several tests assert on, are built once), except that the files of a group below are one unit: they
# share a session- or package-scoped fixture too costly to build once per worker. Groups are by file, not by
# xdist_group mark: pytest-xdist 3.8 marks a group by editing a node id field that pytest 9 no longer reads, so the
# marks silently group nothing there (pytest-dev/pytest-xdist issue 1386, open).
XDIST_FILE_GROUPS = {
    # one real Slurm (munged, slurmctld, two slurmd): tests/slurm's package fixture starts it once per worker
    "slurm": ("tests/slurm/",),
    # the ~50 s rules run of `hostile_rules_run`, launched once per worker that needs it
    "hostile_rules_run": ("tests/agent/test_rules_e2e.py", "tests/security/test_secret_canary.py"),
}
FIXTURE_GROUPS = {"hostile_rules_run": "hostile_rules_run"}  # a test using the fixture must be in its group's files



def xdist_scope(nodeid: str) -> str:
    """The work unit of a test: its file group's name, or its file."""
    path = nodeid.split("::", 1)[0]
    for group, prefixes in XDIST_FILE_GROUPS.items():
        if path.startswith(prefixes):
            return group
    return path


def pytest_collection_modifyitems(config, items):
    """A new user of a shared costly fixture outside its group's files would silently rebuild it on another
    worker: refuse to run until it is listed."""
    for item in items:
        if long_reason(item.nodeid) is not None:
            item.add_marker(pytest.mark.long)
        for fixture, group in FIXTURE_GROUPS.items():
            if fixture in getattr(item, "fixturenames", ()) and xdist_scope(item.nodeid) != group:
                raise pytest.UsageError(f"{item.nodeid} uses {fixture}: add its file to XDIST_FILE_GROUPS[{group!r}] "
                                        "in tests/conftest.py")


@pytest.hookimpl(optionalhook=True)  # only a hook when pytest-xdist is installed
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FileGroupScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return FileGroupScheduling(config, log)
