"""scripts/setup_env.sh: a re-run with nothing changed installs nothing (and says so); a changed pyproject.toml
changes the fingerprint that decides it. Run on a copy of the script in a scratch tree whose .venv is this one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup_env.sh", tmp_path / "scripts")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "msmigrate").mkdir()
    (tmp_path / "msmigrate" / "__init__.py").write_text("")  # "msmigrate importable from this checkout"
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    (bin_dir / "activate").write_text(f'export PATH="{Path(sys.executable).parent}:$PATH"\n')
    return tmp_path


def _setup(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(tree / "scripts" / "setup_env.sh"), *args], cwd=tree, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_rerun_with_nothing_changed_installs_nothing(tmp_path):
    tree = _tree(tmp_path)
    stamp = _setup(tree, "--stamp")
    assert stamp.returncode == 0 and len(stamp.stdout.strip()) == 64, stamp.stderr
    (tree / ".venv" / ".msmigrate-install-stamp").write_text(stamp.stdout)
    again = _setup(tree)
    assert again.returncode == 0, again.stderr
    assert "up to date" in again.stdout and "installing" not in again.stdout and "Collecting" not in again.stdout
    with (tree / "pyproject.toml").open("a") as f:
        f.write("\n# a new dependency would go here\n")
    assert _setup(tree, "--stamp").stdout != stamp.stdout


def test_pyproject_licence_is_an_spdx_string():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "Apache-2.0"  # a table makes setuptools print a deprecation per build
    assert any(r.startswith("setuptools>=7") and int(r.split(">=")[1].split(".")[0]) >= 77
               for r in meta["build-system"]["requires"])
