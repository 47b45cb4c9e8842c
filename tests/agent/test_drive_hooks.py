"""The one run loop (``Run.drive``) with a face's hooks, as the chat uses it: progress per node, a stop at a step
boundary that resumes exactly there, instructions written between steps, and an exit_status on every way out."""

from __future__ import annotations

from pathlib import Path

from agent_fakes import FakeGates, ScriptedPolicy, make_run

from msmigrate.agent.runner import DriveHooks


def test_on_step_sees_every_node_in_order(fast_prepare, tmp_path):
    nodes: list[str] = []
    with make_run(fast_prepare, tmp_path, ScriptedPolicy(), FakeGates()) as run:
        out = run.drive(hooks=DriveHooks(on_step=lambda node, update: nodes.append(node)))
    assert out["exit_status"] == "success"
    assert nodes[:2] == ["prepare", "plan"] and nodes[-1] == "report"
    assert nodes.index("model") < nodes.index("data") < nodes.index("config") < nodes.index("verify")


def test_stop_at_a_step_boundary_then_resume_from_there(fast_prepare, tmp_path):
    gates = FakeGates()
    seen: list[str] = []
    with make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates) as run:
        hooks = DriveHooks(on_step=lambda node, update: seen.append(node), stop_requested=lambda: "data" in seen)
        out = run.drive(hooks=hooks)
        assert out["exit_status"] == "stopped_by_user"
        assert run.snapshot()["exit_status"] is None  # the run itself has not ended
        calls_at_stop = list(gates.calls)
        assert "G1" in calls_at_stop and "G4" not in calls_at_stop
        assert run.trajectory.records("stopped")[-1]["by"] == "user"
        out = run.drive()  # a headless drive continues from the checkpoint of that step
        assert out["exit_status"] == "success", out.get("exit_detail")
    assert gates.calls[: len(calls_at_stop)] == calls_at_stop
    assert gates.calls.count("G1") == 1  # nothing before the stop ran again


def test_instructions_are_written_between_steps_and_reach_the_policy(fast_prepare, tmp_path):
    queue = ["keep the learning rate of the similar case"]
    seen: list[str] = []
    policy = ScriptedPolicy()
    with make_run(fast_prepare, tmp_path, policy, FakeGates()) as run:
        hooks = DriveHooks(on_step=lambda node, update: seen.append(node),
                           has_instructions=lambda: bool(queue) and "plan" in seen,
                           take_instructions=lambda: [queue.pop()] if queue else [])
        out = run.drive(hooks=hooks)
        records = run.trajectory.records("instruction")
    assert out["exit_status"] == "success" and not queue
    assert "keep the learning rate" in out["instructions"]
    assert [r["text"] for r in records] == ["keep the learning rate of the similar case"]
    assert "keep the learning rate" in policy.views[0].state["instructions"]  # the first decision after it


def test_a_bug_in_a_hook_ends_the_drive_with_error_and_the_traceback(fast_prepare, tmp_path):
    def broken(node, update):
        if node == "model":
            raise RuntimeError("display broke")

    with make_run(fast_prepare, tmp_path, ScriptedPolicy(), FakeGates()) as run:
        out = run.drive(hooks=DriveHooks(on_step=broken))
        assert out["exit_status"] == "error" and "display broke" in out["exit_detail"]
        assert "RuntimeError: display broke" in Path(out["error_file"]).read_text()
        assert run.drive()["exit_status"] == "success"  # the run resumes past it


def test_an_unanswered_approval_is_awaiting_approval(fast_prepare, tmp_path):
    with make_run(fast_prepare, tmp_path, ScriptedPolicy(), FakeGates(), approval=True) as run:
        out = run.drive()
        assert out["exit_status"] == "awaiting_approval" and out["interrupt"]["kind"] == "code_execution"
        out = run.drive(lambda payload: {"action": "approve"}, resume_value={"action": "approve"})
    assert out["exit_status"] == "success" and "interrupt" not in out
