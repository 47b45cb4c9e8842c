"""The user's checkout is theirs: a dirty checkout stays exactly as it was through a run that edits, undoes and
rolls back; two runs on one target at the same time share no work tree and no branch; a second run starts from the
user's branch, never from the first run's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.policies.base import tool_call
from msmigrate.tools.file_writer import file_writer_tools
from msmigrate.tools.worktree import checkout_state

REPO = Path(__file__).resolve().parents[2]
FACES = REPO / "tests" / "faces"
AGENT = REPO / "tests" / "agent"
sys.path.insert(0, str(AGENT))
sys.path.insert(0, str(FACES))

from agent_fakes import FakeGates, ScriptedPolicy  # noqa: E402
from fake_run import ScriptedPolicy as WritingPolicy, held_marker, release_file  # noqa: E402

PLUGIN = "mindspeed_mm/fsdp/models/qwen2_vl/__init__.py"


def make_dirty(checkout: Path) -> dict[str, bytes]:
    """Uncommitted work of every kind, some of it exactly where the run will write."""
    cfg = checkout / "examples/qwen3vl/qwen3vl_config.yaml"
    cfg.write_text(cfg.read_text() + "# my uncommitted tuning\n")  # modified, unstaged
    readme = checkout / "README.md"
    readme.write_text("staged change\n")
    subprocess.run(["git", "-C", str(checkout), "add", "README.md"], check=True)  # staged
    (checkout / PLUGIN).parent.mkdir(parents=True, exist_ok=True)
    (checkout / PLUGIN).write_text("# my own draft plugin, untracked\n")  # untracked, on the run's path
    (checkout / "notes.log").write_text("ignored? maybe\n")
    return {p: (checkout / p).read_bytes() for p in ("examples/qwen3vl/qwen3vl_config.yaml", "README.md", PLUGIN,
                                                     "notes.log")}


def run_in_process(spec: RunSpec, run_id: str, runs: Path, policy, tools=file_writer_tools):
    from msmigrate.agent.runner import Run

    settings = Settings(runs_dir=runs, runtime_python=sys.executable)
    r = Run(spec, run_id, settings, policy=policy, tools=tools, gates=FakeGates().as_dict())
    try:
        return r, r.drive()
    finally:
        r.close()


def test_dirty_checkout_stays_exactly_as_it_was(tmp_path, source_model, standin):
    contents = make_dirty(standin)
    before = checkout_state(standin)
    assert before["status"].strip(), "the checkout must really be dirty"
    write = tool_call("write_file", {"path": PLUGIN, "content": "X = 1\n", "reason": "plugin"})
    policy = ScriptedPolicy({"model": [[write], [tool_call("undo_last_edit", {})], [write],
                                       [tool_call("rollback", {"phase_or_commit": "base"})], [write]]})
    spec = RunSpec(source=source_model, target=standin, model_name="qwen2_vl")
    r, out = run_in_process(spec, "dirty-1", tmp_path / "runs", policy)
    assert out["exit_status"] == "success", out.get("exit_detail")
    last = [v for v in policy.views if v.phase == "model"][-1]  # its conversation holds every observation once
    results = [json.loads(m.content) for m in last.messages if isinstance(m, ToolMessage)]
    assert [res["ok"] for res in results] == [True, True, True, True, True]
    assert checkout_state(standin) == before  # same branch, HEAD, index, untracked and ignored files, stash
    assert {p: (standin / p).read_bytes() for p in contents} == contents
    shown = subprocess.run(["git", "-C", str(standin), "show", f"msmigrate/dirty-1:{PLUGIN}"], capture_output=True,
                           text=True, check=True).stdout
    assert shown == "X = 1\n"  # the work is on the run's branch
    assert not (r.run_dir / "worktree").exists()  # released at the end; the branch stays
    assert "uncommitted changes" in (r.run_dir / "verification_report.md").read_text()  # the report says so


def test_second_run_starts_from_the_users_branch(tmp_path, source_model, standin):
    """Issue 9: after a run the checkout is back on its branch (it never left it) and the next run's base is the
    user's HEAD, so it cannot pick the first run's YAML as its similar case."""
    user = checkout_state(standin)
    user_head = user["head"]
    spec1 = RunSpec(source=source_model, target=standin, model_name="qwen2_vl")
    _, out1 = run_in_process(spec1, "first-1", tmp_path / "runs", WritingPolicy("qwen2_vl"))
    assert out1["exit_status"] == "success"
    assert checkout_state(standin)["branch"] == user["branch"] and checkout_state(standin) == user
    first_files = subprocess.run(["git", "-C", str(standin), "ls-tree", "-r", "--name-only", "msmigrate/first-1"],
                                 capture_output=True, text=True, check=True).stdout
    assert "examples/qwen2_vl/qwen2_vl_config.yaml" in first_files

    spec2 = RunSpec(source=source_model, target=standin, model_name="qwen2_vl_two")
    r2, out2 = run_in_process(spec2, "second-1", tmp_path / "runs", WritingPolicy("qwen2_vl_two"))
    assert out2["exit_status"] == "success"
    assert out2["artifacts"]["base_commit"] == user_head
    assert "examples/qwen2_vl/" not in (r2.run_dir / "similar_case.md").read_text()
    assert "examples/qwen2_vl/" not in json.dumps(out2["target_summary"])
    second_files = subprocess.run(["git", "-C", str(standin), "ls-tree", "-r", "--name-only", "msmigrate/second-1"],
                                  capture_output=True, text=True, check=True).stdout
    assert "examples/qwen2_vl/" not in second_files and "examples/qwen2_vl_two/" in second_files


DRIVER = """
import json, sys
from pathlib import Path
from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.runner import Run
import fake_run
spec = RunSpec.load(Path(sys.argv[1]))
settings = Settings(runs_dir=Path(sys.argv[3]))
r = Run(spec, sys.argv[2], settings, **fake_run.overrides(spec, sys.argv[2], settings))
state = r.drive()
r.close()
print(json.dumps({"exit_status": state.get("exit_status"), "detail": state.get("exit_detail")}))
"""


def test_concurrent_runs_on_one_target_share_nothing(tmp_path, source_model, standin):
    before = checkout_state(standin)
    # Both runs' G1 are held until each has reached it: the two are provably in flight at once, each with its own
    # worktree and branch already made and written to, whatever the machine's load
    holds = tmp_path / "holds"
    env = {**os.environ, "PYTHONPATH": str(FACES), "FAKE_GATE_HOLD_DIR": str(holds), "FAKE_SLOW_GATES": "G1",
           "HF_HUB_OFFLINE": "1"}
    procs = {}
    for name in ("conc_a", "conc_b"):
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(f"source: {source_model}\ntarget: {standin}\nmodel_name: {name}\n")
        procs[name] = subprocess.Popen([sys.executable, "-c", DRIVER, str(spec), f"{name}-1", str(tmp_path / "runs")],
                                       env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True)
    deadline = time.monotonic() + 240
    while not all(held_marker(holds, f"{name}-1", "G1").is_file() for name in procs):
        exited = {name: p.returncode for name, p in procs.items() if p.poll() is not None}
        assert not exited, f"a run ended before both were held in G1: {exited}"
        assert time.monotonic() < deadline, "the two runs were never in G1 at once"
        time.sleep(0.1)
    worktrees = subprocess.run(["git", "-C", str(standin), "worktree", "list"], capture_output=True, text=True,
                               check=True).stdout
    assert len(worktrees.strip().splitlines()) == 3  # the user's checkout and one worktree per run, at once
    release_file(holds).touch()
    for name, p in procs.items():
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        assert json.loads(out.strip().splitlines()[-1])["exit_status"] == "success", out
    assert checkout_state(standin) == before
    for name in procs:
        branch = f"msmigrate/{name}-1"
        log = subprocess.run(["git", "-C", str(standin), "log", "--format=%B", f"{branch}/base..{branch}"],
                             capture_output=True, text=True, check=True).stdout
        trailers = [ln for ln in log.splitlines() if ln.startswith("Msmigrate-Run:")]
        assert trailers and set(trailers) == {f"Msmigrate-Run: {name}-1"}  # only its own commits
        files = subprocess.run(["git", "-C", str(standin), "diff", "--name-only", f"{branch}/base..{branch}"],
                               capture_output=True, text=True, check=True).stdout.split()
        assert files and all(f"/{name}/" in f for f in files), files
    worktrees = subprocess.run(["git", "-C", str(standin), "worktree", "list"], capture_output=True, text=True).stdout
    assert len(worktrees.strip().splitlines()) == 1  # both released; only the user's checkout remains
