"""A kill -9 of the agent and of its ``git commit``, then ``--resume``: the edit on disk reaches the branch, the lock
the dead git left is cleared with a note in the trajectory, the report shows the change, and the end of the run
never removes a work tree that holds what its branch does not.

The git side is real: a real ``git commit`` of a file the agent wrote, stopped inside its commit (it holds
``index.lock`` while it waits for its editor) and killed with SIGKILL. The agent's own death is the step it dies in
never completing: an exception that is not an ``Exception`` escapes the tools node, so no checkpoint of that step is
written and nothing in the process cleans up after it — what a kill -9 leaves, seen from the checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import git
import pytest

from agent_fakes import FakeGates, ScriptedPolicy, make_run
from msmigrate.agent.policies.base import tool_call
from msmigrate.agent.runner import Run
from msmigrate.core.tool_result import make_tool
from msmigrate.tools import safe_fs
from msmigrate.tools.file_writer import WriteFileArgs, file_writer_tools, write_file
from msmigrate.tools.worktree import git_dir, release_worktree

PLUGIN = "mindspeed_mm/fsdp/models/fakevl"


class AgentKilled(BaseException):
    """The agent process is gone (kill -9): not an Exception, so no handler of the run loop sees it."""


def _die_inside_a_commit(tree: Path, rel: str, content: str) -> Path:
    """What the file writer does for one edit, killed half-way: the file is on disk, ``git add`` ran, and the
    ``git commit`` holds the index lock when SIGKILL reaches it."""
    safe_fs.write_text(tree, rel, content)
    subprocess.run(["git", "-C", str(tree), "add", "-f", "--", rel], check=True)
    lock = git_dir(tree) / "index.lock"
    env = {**os.environ, "GIT_EDITOR": "sleep 600", "GIT_AUTHOR_NAME": "m", "GIT_AUTHOR_EMAIL": "m@x",
           "GIT_COMMITTER_NAME": "m", "GIT_COMMITTER_EMAIL": "m@x"}
    proc = subprocess.Popen(["git", "-C", str(tree), "commit", "--only", "--", rel], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 30
    while not lock.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert lock.exists(), "git commit never took its lock"
    os.killpg(proc.pid, signal.SIGKILL)  # git and its editor die inside the commit
    proc.wait()
    return lock


def test_kill_inside_a_commit_then_resume_keeps_the_edit(fast_prepare, tmp_path):
    died = []

    def crashing_write(ctx):
        def write(path: str, content: str, reason: str = ""):
            if not died:  # the first call: the agent and its git die inside the commit
                died.append(_die_inside_a_commit(Path(ctx.target), path, content))
                raise AgentKilled
            return write_file(ctx, path, content, reason)  # the resumed run replays the pending call

        return make_tool("write_file_b", "write (dies once)", WriteFileArgs, write)

    def tools(ctx):
        return [*file_writer_tools(ctx), crashing_write(ctx)]

    script = {"model": [[tool_call("write_file", {"path": f"{PLUGIN}/a.py", "content": "A = 1\n"})],
                        [tool_call("write_file_b", {"path": f"{PLUGIN}/b.py", "content": "B = 2\n"})]]}
    gates = FakeGates()
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(script), gates, tools=tools)
    with pytest.raises(AgentKilled):
        run.drive()
    run.close()
    (lock,) = died
    tree, branch = run.ctx.target, run.ctx.work_branch
    assert lock.exists() and (tree / PLUGIN / "b.py").read_text() == "B = 2\n"
    repo = git.Repo(run.ctx.checkout)
    assert f"{PLUGIN}/b.py" not in repo.git.ls_tree("-r", "--name-only", branch).splitlines()  # not in git
    # the work tree holds the only copy of b.py: ending the run now must not remove it
    kept = release_worktree(run.ctx.checkout, tree)
    assert kept and str(tree) in kept and f"{PLUGIN}/b.py" in kept and tree.is_dir()

    time.sleep(1.1)  # the lock is older than a starting git's
    again = Run.resume(run.run_id, run.settings, policy=ScriptedPolicy(script), tools=tools, gates=gates.as_dict())
    try:
        out = again.drive()
    finally:
        again.close()
    assert out["exit_status"] == "success", out.get("exit_detail")
    assert not lock.exists()
    recovered = [r for r in again.trajectory.records("writer_recovered")]
    assert [r["what"] for r in recovered] == ["git lock of a dead writer removed", "files on disk but not in git committed"]
    assert recovered[0]["paths"] == [str(lock)] and recovered[1]["paths"] == [f"{PLUGIN}/b.py"]
    # the branch holds both edits; the gates ran on the commit that holds them; the report shows them
    files = repo.git.ls_tree("-r", "--name-only", branch).splitlines()
    assert {f"{PLUGIN}/a.py", f"{PLUGIN}/b.py"} <= set(files)
    assert repo.git.show(f"{branch}:{PLUGIN}/b.py") == "B = 2"
    tip = repo.rev_parse(branch).hexsha
    assert out["gates"]["G1"]["target_commit"] == tip
    evidence = json.loads((again.run_dir / "evidence.json").read_text())
    assert set(evidence["gate_currency"].values()) == {"current"} and len(evidence["gate_currency"]) == 7
    report = (again.run_dir / "verification_report.md").read_text()
    assert report.startswith("**success** — all gates passed with evidence") and "(no changes)" not in report
    assert f"{PLUGIN}/b.py" in report
    assert not tree.exists()  # clean at the end: released, the branch has everything
