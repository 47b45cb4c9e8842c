"""``settle_worktree``: what a gate may run on — the work branch checked out, no lock of a dead writer, the run's
own writes committed, a write that never reached its rename deleted, anything else refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git

from msmigrate.agent.trajectory import Trajectory
from msmigrate.agent.writer_recovery import settle_worktree
from msmigrate.core.run_context import RunContext
from msmigrate.tools.worktree import attach

PLUGIN = "mindspeed_mm/fsdp/models/m1"


def _ctx(tmp_path: Path) -> RunContext:
    repo = git.Repo.init(tmp_path / "target", initial_branch="main")
    (tmp_path / "target" / "README").write_text("x\n")
    repo.index.add(["README"])
    author = git.Actor("t", "t@t.invalid")
    repo.index.commit("base", author=author, committer=author)
    ctx = RunContext(run_id="r1", run_dir=tmp_path / "run", source=tmp_path / "src", target=tmp_path / "target",
                     model_name="m1")
    attach(ctx)
    return ctx


def test_the_runs_writes_are_committed_and_a_torn_write_deleted(tmp_path):
    ctx = _ctx(tmp_path)
    traj = Trajectory(tmp_path / "t.jsonl")
    (ctx.target / PLUGIN).mkdir(parents=True)
    (ctx.target / PLUGIN / "a.py").write_text("A = 1\n")
    torn = ctx.target / PLUGIN / ".b.py.1a2b3c4d.msmigrate-tmp"
    torn.write_text("B = ")
    assert settle_worktree(ctx, traj, "test", {}) is None
    assert not torn.exists()
    repo = git.Repo(ctx.target)
    assert repo.head.commit.message.startswith("msmigrate: commit writes found on disk but not in git (test)")
    assert f"Msmigrate-Run: {ctx.run_id}" in repo.head.commit.message
    assert [r["what"] for r in traj.records("writer_recovered")] == [
        "temporary files of writes that never completed deleted", "files on disk but not in git committed"]
    assert settle_worktree(ctx, traj, "again", {}) is None and len(traj.records("writer_recovered")) == 2


def test_changes_outside_the_editable_paths_or_another_branch_refuse_the_gate(tmp_path):
    ctx = _ctx(tmp_path)
    traj = Trajectory(tmp_path / "t.jsonl")
    (ctx.target / "README").write_text("changed by hand\n")
    why = settle_worktree(ctx, traj, "test", {})
    assert why and "outside the run's editable paths" in why and "M README" in why
    subprocess.run(["git", "-C", str(ctx.target), "checkout", "-q", "--", "README"], check=True)
    extra = "mindspeed_mm/megatron/new_component.py"  # a path the plan made editable: the run's own
    (ctx.target / extra).parent.mkdir(parents=True)
    (ctx.target / extra).write_text("C = 3\n")
    assert settle_worktree(ctx, traj, "test", {"editable_extra": [extra]}) is None
    subprocess.run(["git", "-C", str(ctx.target), "checkout", "-q", "--detach"], check=True)
    why = settle_worktree(ctx, traj, "test", {})
    assert why and "not on the work branch msmigrate/r1" in why
