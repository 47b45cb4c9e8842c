"""Hostile write paths: every one is refused (an observation, never an exception), and nothing outside the run's
editable paths changes — not in the run's worktree, not in the user's checkout, not outside the target.

Counted in README ("Security tests"): HOSTILE_PATHS + SYMLINK_ATTACKS + the swap race + the file-as-directory case."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from attack_kit import fingerprint, git

from msmigrate.tools.file_writer import edit_file, file_writer_tools, write_file

M = "mindspeed_mm/fsdp/models/tiny"
HOSTILE_PATHS = [
    # traversal
    "../escape.py", f"{M}/../../../../escape.py", "examples/tiny/../../README.md", "./../escape.py",
    f"{M}/../other/a.py", f"{M}/..\\..\\x.py", "..\\escape.py", f"{M}/./../../train/trainer.py",
    # absolute
    "/etc/passwd", "/tmp/msmigrate-escape.py", "~/.bashrc", "C:/Windows/x.py", "//server/share/x.py",
    "ABSOLUTE_WORKTREE",  # replaced by the absolute path of an editable file inside the worktree
    # .git (hooks, config) at any depth and in any case
    ".git/hooks/pre-commit", ".git/config", ".GIT/config", f"{M}/.git/config", "examples/tiny/.git", ".git",
    ".git/info/attributes", f"{M}/.Git/hooks/post-checkout",
    # framework core and everything else outside the editable paths
    "mindspeed_mm/fsdp/train/trainer.py", "mindspeed_mm/fsdp/utils/register.py", "mindspeed_mm/fsdp/models/modelhub.py",
    "mindspeed_mm/fsdp/distributed/torch_parallelize.py", "mindspeed_mm/fsdp/train/Trainer.py",
    "MINDSPEED_MM/fsdp/train/trainer.py", "mindspeed_mm/fsdp/models/TINY/a.py", "README.md", "setup.py",
    "mindspeed_mm/fsdp/models/other_model/a.py", M, "examples/qwen3vl/qwen3vl_config.yaml",
    # NUL, control and unicode tricks
    f"{M}/a.py\x00.yaml", f"{M}/\u2025/x.py", f"{M}/\uff0e\uff0e/\uff0e\uff0e/x.py", f"{M}\uff0fx.py",
    f"{M}/a\u202e.py", f"{M}/\u200b../x.py", f"{M}/a.py\n", f"{M}/a\t.py", f"{M}/\ufb01le.py", f"{M}/a\u2028.py",
    # degenerate
    f"{M}/" + "a" * 300 + ".py", "", "   ", f"{M}/",
]


def outside_editable(root: Path) -> dict[str, str]:
    return fingerprint(root, skip=(f"{M}/", "examples/tiny/", ".git"))


@pytest.fixture()
def victim(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "victim.yaml").write_text("a: 1\n")
    return d


def assert_refused_and_nothing_changed(ctx, res, before_wt, before_user, victim: Path, head: str) -> None:
    assert not res.ok and res.error, res
    assert outside_editable(ctx.target) == before_wt
    assert fingerprint(ctx.checkout, skip=(".git",)) == before_user
    assert sorted(p.name for p in victim.iterdir()) == ["victim.yaml"]
    assert (victim / "victim.yaml").read_text() == "a: 1\n"
    assert git(ctx.target, "rev-parse", "HEAD").strip() == head  # nothing committed


def test_the_list_is_long_enough():
    assert len(HOSTILE_PATHS) >= 40


@pytest.mark.parametrize("path", HOSTILE_PATHS, ids=[repr(p)[:48] for p in HOSTILE_PATHS])
def test_hostile_path_is_refused(ctx, victim, path):
    if path == "ABSOLUTE_WORKTREE":
        path = str(ctx.target / M / "a.py")
    before_wt, before_user = outside_editable(ctx.target), fingerprint(ctx.checkout, skip=(".git",))
    head = git(ctx.target, "rev-parse", "HEAD").strip()
    tools = {t.name: t for t in file_writer_tools(ctx)}
    out = tools["write_file"].invoke({"path": path, "content": "x = 1\n", "reason": "attack"})  # never raises
    assert '"ok": false' in out
    res = write_file(ctx, path, "x = 1\n")
    assert_refused_and_nothing_changed(ctx, res, before_wt, before_user, victim, head)
    res = edit_file(ctx, path, "x", "y")
    assert_refused_and_nothing_changed(ctx, res, before_wt, before_user, victim, head)


def _link_core_dir(ctx, victim):
    os.makedirs(ctx.target / "examples", exist_ok=True)
    os.symlink(ctx.target / "mindspeed_mm/fsdp/train", ctx.target / "examples/tiny")
    return "examples/tiny/trainer.py"


def _link_outside_dir(ctx, victim):
    os.symlink(victim, ctx.target / "examples/tiny")
    return "examples/tiny/victim.yaml"


def _link_outside_file(ctx, victim):
    (ctx.target / "examples/tiny").mkdir(parents=True)
    os.symlink(victim / "victim.yaml", ctx.target / "examples/tiny/cfg.yaml")
    return "examples/tiny/cfg.yaml"


def _link_to_root(ctx, victim):
    (ctx.target / M).mkdir(parents=True)
    os.symlink("../../../..", ctx.target / M / "up")
    return f"{M}/up/README.md"


def _link_git_hooks(ctx, victim):
    (ctx.target / M).mkdir(parents=True)
    os.symlink(ctx.checkout / ".git" / "hooks", ctx.target / M / "hooks")
    return f"{M}/hooks/post-commit"


def _link_core_file(ctx, victim):
    (ctx.target / M).mkdir(parents=True)
    os.symlink(ctx.target / "mindspeed_mm/fsdp/train/trainer.py", ctx.target / M / "modeling_tiny.py")
    return f"{M}/modeling_tiny.py"


def _link_relative_chain(ctx, victim):
    (ctx.target / M).mkdir(parents=True)
    os.symlink(victim, ctx.target / M / "a")
    os.symlink("a", ctx.target / M / "b")
    return f"{M}/b/victim.yaml"


SYMLINK_ATTACKS = [_link_core_dir, _link_outside_dir, _link_outside_file, _link_to_root, _link_git_hooks,
                   _link_core_file, _link_relative_chain]


@pytest.mark.parametrize("setup", SYMLINK_ATTACKS, ids=[f.__name__ for f in SYMLINK_ATTACKS])
def test_symlink_attack_is_refused(ctx, victim, setup):
    path = setup(ctx, victim)
    hooks = fingerprint(ctx.checkout / ".git" / "hooks")
    before = fingerprint(ctx.target / "mindspeed_mm/fsdp/train") | {"README": (ctx.target / "README.md").read_text()}
    res = write_file(ctx, path, "x = 1\n" if path.endswith(".py") else "a: 2\n")
    assert not res.ok and ("symlink" in res.error or "outside" in res.error or "protected" in res.error), res.error
    assert (victim / "victim.yaml").read_text() == "a: 1\n" and sorted(os.listdir(victim)) == ["victim.yaml"]
    assert fingerprint(ctx.target / "mindspeed_mm/fsdp/train") | {"README": (ctx.target / "README.md").read_text()} \
        == before
    assert fingerprint(ctx.checkout / ".git" / "hooks") == hooks


SWAPPER = """
import os, sys, shutil, signal
real, victim, count = sys.argv[1], sys.argv[2], sys.argv[3]
swaps = 0
def done(*_):
    open(count, "w").write(str(swaps))
    os._exit(0)
signal.signal(signal.SIGTERM, done)
while True:
    try:
        if os.path.islink(real):
            os.unlink(real)
            os.mkdir(real)
        else:
            shutil.rmtree(real, ignore_errors=True)
            os.symlink(victim, real)
        swaps += 1
    except OSError:
        pass
"""


def test_symlink_swap_race_cannot_escape(ctx, victim):
    """Another process swaps an editable directory for a symlink to an outside directory and back, as fast as it
    can, while 150 writes go into that directory. Writes may succeed (into the real directory) or be refused (the
    symlink was there); none may land outside. (With a check-then-open writer this leaks; see the README.)"""
    base = ctx.target / M
    base.mkdir(parents=True)
    real = base / "sub"
    count = victim.parent / "swaps"
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(real), str(victim), str(count)])
    results = []
    try:
        for i in range(150):
            results.append(write_file(ctx, f"{M}/sub/f{i}.py", f"x = {i}\n"))
    finally:
        swapper.terminate()
        swapper.wait()
    assert sorted(os.listdir(victim)) == ["victim.yaml"], "a write escaped through the swapped symlink"
    assert (victim / "victim.yaml").read_text() == "a: 1\n"
    refused = [r for r in results if not r.ok]
    assert all(r.error for r in refused)
    assert int(count.read_text()) > 150, "the swapper hardly ran: the race was not exercised"


def test_a_path_under_an_existing_file_is_an_observation_not_a_crash(ctx):
    assert write_file(ctx, f"{M}/a.py", "x = 1\n").ok
    res = write_file(ctx, f"{M}/a.py/b.py", "y = 1\n")
    assert not res.ok and "a.py" in res.error
    tools = {t.name: t for t in file_writer_tools(ctx)}
    assert '"ok": false' in tools["write_file"].invoke({"path": f"{M}/a.py/c.py", "content": "z = 1\n"})
