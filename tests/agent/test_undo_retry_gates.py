"""``/undo`` after a finished run, then ``/retry config``: the records of the undone commit stop counting — the
report and ``/status`` read "stale, re-run" for them, not PASS — and the retry runs G3 and then G4–G6 again on the
branch as it is, instead of going straight to success (``next_phase`` saw the old G4–G6 as passed)."""

from __future__ import annotations

import io
import json

import git
from rich.console import Console

from agent_fakes import FakeGates, ScriptedPolicy, make_run
from msmigrate.agent.policies.base import tool_call
from msmigrate.faces.chat.commands import cmd_gates, cmd_retry, cmd_status, cmd_undo
from msmigrate.tools.file_writer import file_writer_tools

CONFIG = "examples/fakevl/fakevl.yaml"
SCRIPT = "examples/fakevl/finetune.sh"


class Session:
    """The part of the chat session the commands use, driving in this thread."""

    def __init__(self, run):
        self.run, self.pending, self.driver = run, None, None
        self.out = io.StringIO()
        self.console = Console(file=self.out, width=400, soft_wrap=True)
        self.outcome = None

    def need_run(self) -> bool:
        return True

    def refuse_if_busy(self) -> bool:
        return False

    def drive(self, resume_value=None) -> None:
        self.outcome = self.run.drive(resume_value=resume_value)

    def said(self) -> str:
        text, self.out = self.out.getvalue(), io.StringIO()
        self.console.file = self.out
        return text


def test_undo_then_retry_config_runs_g3_to_g6_again(fast_prepare, tmp_path):
    script = {"config": [[tool_call("write_file", {"path": CONFIG, "content": "a: 1\n"})],
                         [tool_call("write_file", {"path": SCRIPT, "content": "echo go\n"})]]}
    gates = FakeGates()
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(script), gates,
                   tools=lambda ctx: file_writer_tools(ctx))
    s = Session(run)
    try:
        out = run.drive()
        assert out["exit_status"] == "success" and gates.calls == ["G1", "G2", "G3", "G4", "G5", "G6"]
        repo, branch = git.Repo(run.ctx.checkout), run.ctx.work_branch
        before_config = out["gates"]["G2"]["target_commit"]

        cmd_undo(s, "")
        said = s.said()
        assert "no longer proven (stale, re-run): G3, G4, G5, G6" in said and "report rewritten" in said
        cmd_undo(s, "")  # the second one: the branch is back where G2 proved it
        s.said()
        assert repo.rev_parse(branch).hexsha == before_config
        state = run.snapshot()
        assert sorted(state["gates"]) == ["G0", "G1", "G2"]  # exactly the records the undos made stale dropped
        cmd_status(s, "")
        status = s.said()
        assert "gates passed: G0, G1, G2" in status and "stale, re-run: G3, G4, G5, G6" in status
        cmd_gates(s, "")
        table = s.said()
        assert table.count("stale, re-run") == 4 and table.count("PASS") == 3
        report = (run.run_dir / "verification_report.md").read_text()
        assert report.startswith("**stale, re-run** — the run ended success, but G3, G4, G5, G6 no longer prove")
        assert "| G3 |" in report and "| PASS |" not in report.split("| G3 |", 1)[1].split("\n", 1)[0]

        cmd_retry(s, "config")
        assert s.outcome["exit_status"] == "success", s.outcome.get("exit_detail")
        assert gates.calls == ["G1", "G2", "G3", "G4", "G5", "G6", "G3", "G4", "G5", "G6"]
        tip = repo.rev_parse(branch).hexsha
        assert {g: s.outcome["gates"][g]["target_commit"] for g in ("G3", "G4", "G5", "G6")} == dict.fromkeys(
            ("G3", "G4", "G5", "G6"), tip)
        evidence = json.loads((run.run_dir / "evidence.json").read_text())
        assert set(evidence["gate_currency"].values()) == {"current"}
        assert (run.run_dir / "verification_report.md").read_text().startswith("**success**")
    finally:
        run.close()


def test_an_approval_edit_after_a_stop_runs_g4_again(fast_prepare, tmp_path):
    """Stopped after G4, resumed, and the launch edited at the approval: G4's record proved another launch, so it
    runs again (without the edit, the resumed verify keeps it and goes on at G5)."""
    import threading

    from msmigrate.agent.runner import DriveHooks

    stop = threading.Event()
    gates = FakeGates()
    g4 = gates.gate("G4")

    def g4_then_ctrl_c(deps, state):
        record = g4(deps, state)
        stop.set()
        return record

    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates, approval=True)
    run.deps.gates["G4"] = g4_then_ctrl_c
    try:
        assert run.drive()["interrupt"]["kind"] == "code_execution"
        assert run.drive(resume_value={"action": "approve"})["interrupt"]["kind"] == "launch"
        out = run.drive(resume_value={"action": "approve"}, hooks=DriveHooks(stop_requested=stop.is_set))
        assert out["exit_status"] == "stopped_by_user" and gates.calls == ["G1", "G2", "G3", "G4"]
        assert (run.run_dir / "verification_report.md").read_text().startswith("**stopped_by_user**")
        run.deps.gates["G4"] = g4
        asked = run.drive()["interrupt"]  # the resumed verify asks again before launching what is left
        assert asked["kind"] == "launch" and asked["gates"] == ["G5", "G6"]
        out = run.drive(resume_value={"action": "edit", "launch": {"nproc_per_node": 3}})
        assert out["exit_status"] == "success", out.get("exit_detail")
        assert gates.calls == ["G1", "G2", "G3", "G4", "G4", "G5", "G6"]
        (dropped,) = run.trajectory.records("gates_invalidated")
        assert dropped["why"] == "launch settings edited at the approval" and list(dropped["gates"]) == ["G4"]
    finally:
        run.close()
