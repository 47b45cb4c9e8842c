"""A kill -9 of the agent and of its ``git commit``, then ``--resume``: the edit on disk reaches the branch, the lock
the dead git left is cleared with a note in the trajectory, the report shows the change, and the end of a run never
removes a work tree that holds what its branch does not.

All real: the agent is its own process (``dead_writer_child.py``) whose second edit goes through the file writer's
steps — file on disk, ``git add``, ``git commit`` — and the commit, holding ``index.lock`` while it waits for its
editor, is killed with SIGKILL together with the agent (one process group)."""

from __future__ import annotations

import json
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import git

from agent_fakes import FakeGates
from dead_writer_child import PLUGIN, scripted
from msmigrate.agent.config import Settings
from msmigrate.agent.runner import Run
from msmigrate.core.tool_result import make_tool
from msmigrate.tools.file_writer import WriteFileArgs, file_writer_tools, write_file
from msmigrate.tools.worktree import git_dir, release_worktree

CHILD = Path(__file__).with_name("dead_writer_child.py")


def test_kill_inside_a_commit_then_resume_keeps_the_edit(fast_prepare, tmp_path):
    workspace = tmp_path / "workspace.pickle"
    workspace.write_bytes(pickle.dumps(fast_prepare))
    runs, run_id = tmp_path / "runs", "dead-writer-1"
    child = subprocess.run([sys.executable, str(CHILD), str(workspace), str(runs), run_id], capture_output=True,
                           text=True, timeout=300, start_new_session=True)
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]

    tree = runs / run_id / "worktree"
    lock = git_dir(tree) / "index.lock"
    branch = f"msmigrate/{run_id}"
    repo = git.Repo(fast_prepare["target"])
    assert lock.exists() and (tree / PLUGIN / "b.py").read_text() == "B = 2\n"
    on_branch = repo.git.ls_tree("-r", "--name-only", branch).splitlines()
    assert f"{PLUGIN}/a.py" in on_branch and f"{PLUGIN}/b.py" not in on_branch  # b.py: only on disk
    kept = release_worktree(fast_prepare["target"], tree)  # ending a run now must not remove the only copy
    assert kept and str(tree) in kept and f"{PLUGIN}/b.py" in kept and tree.is_dir()

    def tools(ctx):  # the resumed run replays the pending call through the real writer
        return [*file_writer_tools(ctx), make_tool("write_file_b", "write", WriteFileArgs,
                                                   lambda path, content, reason="": write_file(ctx, path, content))]

    time.sleep(1.1)  # the lock is older than a starting git's
    gates = FakeGates()
    settings = Settings(runs_dir=runs, runtime_python=sys.executable)
    again = Run.resume(run_id, settings, policy=scripted(), tools=tools, gates=gates.as_dict())
    try:
        out = again.drive()
    finally:
        again.close()
    assert out["exit_status"] == "success", out.get("exit_detail")
    assert not lock.exists()
    recovered = again.trajectory.records("writer_recovered")
    assert [r["what"] for r in recovered] == ["git lock of a dead writer removed", "files on disk but not in git committed"]
    assert str(lock) in recovered[0]["paths"] and recovered[1]["paths"] == [f"{PLUGIN}/b.py"]
    assert not list(lock.parent.glob("*.lock"))  # the partial commit's next-index-<pid>.lock too
    # the branch holds both edits, the gates ran on the commit that holds them, the report shows them
    assert {f"{PLUGIN}/a.py", f"{PLUGIN}/b.py"} <= set(repo.git.ls_tree("-r", "--name-only", branch).splitlines())
    assert repo.git.show(f"{branch}:{PLUGIN}/b.py") == "B = 2"
    assert out["gates"]["G1"]["target_commit"] == repo.rev_parse(branch).hexsha
    evidence = json.loads((again.run_dir / "evidence.json").read_text())
    assert set(evidence["gate_currency"].values()) == {"current"} and len(evidence["gate_currency"]) == 7
    report = (again.run_dir / "verification_report.md").read_text()
    assert report.startswith("**success** — all gates passed with evidence") and "(no changes)" not in report
    assert f"{PLUGIN}/b.py" in report
    assert not tree.exists()  # clean at the end: released, the branch has everything
