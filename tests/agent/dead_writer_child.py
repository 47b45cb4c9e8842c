"""The agent of ``test_dead_writer_resume``: a run whose second edit is killed with SIGKILL inside its ``git
commit`` — the agent and its git together (one process group), as an OOM kill of the cgroup or a power cut does.

Usage: python dead_writer_child.py WORKSPACE.pickle RUNS_DIR RUN_ID (the session's prepare results, pickled, so
this process skips the slow probes exactly as the in-process tests do)."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

PLUGIN = "mindspeed_mm/fsdp/models/fakevl"
SCRIPT = {"model": [[{"name": "write_file", "args": {"path": f"{PLUGIN}/a.py", "content": "A = 1\n"}}],
                    [{"name": "write_file_b", "args": {"path": f"{PLUGIN}/b.py", "content": "B = 2\n"}}]]}


def scripted():
    from agent_fakes import ScriptedPolicy
    from msmigrate.agent.policies.base import tool_call

    return ScriptedPolicy({phase: [[tool_call(c["name"], c["args"]) for c in step] for step in steps]
                           for phase, steps in SCRIPT.items()})


def die_inside_the_commit(tree: Path, rel: str, content: str) -> None:
    """The file writer's steps for one edit (file written, ``git add``, ``git commit``), with the commit held open
    (its editor never returns, so git keeps ``index.lock``) until SIGKILL reaches the whole process group."""
    from msmigrate.tools import safe_fs
    from msmigrate.tools.worktree import git_dir

    safe_fs.write_text(tree, rel, content)
    subprocess.run(["git", "-C", str(tree), "add", "-f", "--", rel], check=True)
    lock = git_dir(tree) / "index.lock"
    # the editor never returns ("#": git passes the message file after it, through a shell, as a comment)
    env = {**os.environ, "GIT_EDITOR": "sleep 600 #", "GIT_AUTHOR_NAME": "m", "GIT_AUTHOR_EMAIL": "m@x",
           "GIT_COMMITTER_NAME": "m", "GIT_COMMITTER_EMAIL": "m@x"}
    subprocess.Popen(["git", "-C", str(tree), "commit", "--only", "--", rel], env=env, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while not lock.exists() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # git is waiting for its editor now, its lock held
    os.killpg(0, signal.SIGKILL)  # the agent, its git and git's editor


def main() -> None:
    workspace, runs_dir, run_id = pickle.loads(Path(sys.argv[1]).read_bytes()), Path(sys.argv[2]), sys.argv[3]
    import msmigrate.agent.nodes.plan as plan
    import msmigrate.agent.nodes.prepare as prepare

    prepare.hf_summary = lambda *a, **k: workspace["summary"]
    prepare.target_inventory = lambda *a, **k: workspace["inventory"]
    prepare.run_probe = lambda *a, **k: workspace["env"]
    plan.derive_media_expansion = lambda *a, **k: workspace["expansion"]
    plan.convert_checkpoint = lambda *a, **k: workspace["conversion"]
    from agent_fakes import FakeGates, make_spec
    from msmigrate.agent.config import Settings
    from msmigrate.agent.runner import Run
    from msmigrate.core.tool_result import make_tool
    from msmigrate.tools.file_writer import WriteFileArgs, file_writer_tools

    def tools(ctx):
        die = make_tool("write_file_b", "write (killed inside its commit)", WriteFileArgs,
                        lambda path, content, reason="": die_inside_the_commit(Path(ctx.target), path, content))
        return [*file_writer_tools(ctx), die]

    run = Run(make_spec(workspace), run_id, Settings(runs_dir=runs_dir, runtime_python=sys.executable),
              policy=scripted(), tools=tools, gates=FakeGates().as_dict())
    run.drive()
    raise SystemExit("the run ended instead of being killed")


if __name__ == "__main__":
    main()
