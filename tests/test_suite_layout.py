"""The test suite runs in one pytest call in any combination of folders (``pytest tests/agent tests/faces``, the
whole tree, one file).

The tests have no packages (no ``__init__.py``): pytest puts each test file's folder on ``sys.path`` and imports it
under its bare file name. So two files with one name in two folders shadow each other (pytest stops with "import
file mismatch" for test files; a helper silently comes from the wrong folder), and ``from conftest import …`` gets
whichever folder's conftest was imported first. These rules are checked on the source; the last test proves the
whole tree collects together."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def suite_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if p.relative_to(TESTS).parts[0] not in ("data",)
                  and "snapshots" not in p.parts)


def test_module_names_are_unique_across_folders():
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in suite_files():
        if path.name != "conftest.py":
            by_name[path.stem].append(str(path.relative_to(TESTS)))
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"


def test_nothing_imports_a_conftest():
    offenders = []
    for path in suite_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "conftest" for n in names):
                offenders.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert not offenders, f"move what they import into a helper module with a unique name: {offenders}"


def test_the_whole_tree_collects_in_one_call():
    """Every folder named on the command line, last folder first: pytest then imports all their conftests before
    any test module (the order in which ``pytest tests/faces/x.py tests/agent/y.py`` picked agent's conftest)."""
    folders = sorted((str(p) for p in TESTS.iterdir() if p.is_dir() and p.name not in ("data", "__pycache__")),
                     reverse=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           *folders, str(TESTS)], cwd=TESTS.parent, env=env, capture_output=True, text=True,
                          timeout=600)
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    assert proc.returncode == 0 and "tests collected" in last and "error" not in last, (proc.stdout + proc.stderr)[-3000:]



def test_every_long_tier_entry_names_a_test_file_that_exists():
    """A renamed file would silently move its tests back into the default selection."""
    from suite_tiers import LONG

    missing = [prefix for prefix in LONG if not (TESTS.parent / prefix.split("::", 1)[0]).is_file()]
    assert not missing, f"tests/suite_tiers.py names files that do not exist: {missing}"


def test_a_long_entry_marks_its_file_its_test_and_its_case_only():
    from suite_tiers import LONG, long_reason

    LONG["tests/x/test_a.py::test_b"] = "kept"
    try:
        assert long_reason("tests/x/test_a.py::test_b") == "kept"
        assert long_reason("tests/x/test_a.py::test_b[case]") == "kept"
        assert long_reason("tests/x/test_a.py::test_bc") is None
        assert long_reason("tests/x/test_a.py::test_c") is None
    finally:
        del LONG["tests/x/test_a.py::test_b"]
