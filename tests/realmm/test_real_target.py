"""scripts/real_target.sh builds a usable real target: a git checkout whose trainer imports in the runtime, and
running it again changes nothing."""

from __future__ import annotations

import pytest

import subprocess
from pathlib import Path

from realmm_helpers import real_target

pytestmark = pytest.mark.realmm


def test_real_target_is_a_git_checkout_whose_trainer_imports(tmp_path, realmm_tarballs, real_runtime):
    first = real_target(tmp_path / "t", realmm_tarballs, real_runtime)
    target = Path(first["target"])
    assert target == tmp_path / "t" / "MindSpeed-MM" and (target / ".git").is_dir()
    assert Path(first["runtime_python"]).is_file()
    assert "[real-target] torch 2.7.1" in first["stdout"]  # the script's own import check of the trainer ran
    head = subprocess.run(["git", "-C", str(target), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    again = real_target(tmp_path / "t", realmm_tarballs, real_runtime)
    assert "MindSpeed-MM: git checkout present" in again["stdout"] and "runtime: up to date" in again["stdout"]
    assert subprocess.run(["git", "-C", str(target), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout == head
    clean = subprocess.run(["git", "-C", str(target), "status", "--porcelain"], capture_output=True, text=True)
    assert clean.stdout == ""
    # mindspeed comes from the MindSpeed checkout through the runtime, not from a copy inside MindSpeed-MM
    where = subprocess.run([first["runtime_python"], "-c", "import mindspeed; print(mindspeed.__path__[0])"],
                           capture_output=True, text=True, cwd=target)
    assert where.stdout.strip() == str(tmp_path / "t" / "MindSpeed" / "mindspeed")
