"""Human approval (spec.approval) before the model-written code first runs (G1) and before the training launches:
interrupt payloads, reject, approve, edit."""

from __future__ import annotations

import json

from agent_fakes import FakeGates, ScriptedPolicy, make_run


def _paused(ws, tmp_path, gates):
    """Paused at the launch approval (the code-execution approval before G1 answered yes)."""
    run = make_run(ws, tmp_path, ScriptedPolicy(), gates, approval=True)
    out = run.drive()
    assert out["interrupt"]["kind"] == "code_execution" and gates.calls == []
    out = run.drive(resume_value={"action": "approve"})
    return run, out


def test_model_written_code_waits_for_approval_before_g1(fast_prepare, tmp_path):
    gates = FakeGates()
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates, approval=True)
    try:
        out = run.drive()
        payload = out["interrupt"]
        assert payload["kind"] == "code_execution" and payload["gates"] == ["G1"] and payload["phase"] == "model"
        assert gates.calls == []  # nothing that imports the plugin ran
        assert run.ctx.approval and not run.ctx.code_approved
        out = run.drive(resume_value={"action": "reject"})
        assert out["exit_status"] == "rejected_by_user" and gates.calls == []
        assert "model-written code" in out["exit_detail"]
    finally:
        run.close()


def test_drive_without_approver_pauses_with_launch_interrupt(fast_prepare, tmp_path):
    gates = FakeGates()
    run, out = _paused(fast_prepare, tmp_path, gates)
    try:
        payload = out["interrupt"]
        assert payload["kind"] == "launch" and payload["gates"] == ["G4", "G5", "G6"]
        assert payload["launch"]["nproc_per_node"] == 2
        assert out["exit_status"] == "awaiting_approval" and out["phase"] == "verify"
        assert run.snapshot()["exit_status"] is None  # the drive's status, not the run's: it goes on when answered
        assert gates.calls == ["G1", "G2", "G3"]  # nothing launched before the answer
        assert run.pending_interrupt() == payload
    finally:
        run.close()


def test_reject_ends_with_rejected_by_user(fast_prepare, tmp_path):
    gates = FakeGates()
    run, _ = _paused(fast_prepare, tmp_path, gates)
    try:
        out = run.drive(resume_value={"action": "reject"})
        assert out["exit_status"] == "rejected_by_user" and "interrupt" not in out
        assert gates.calls == ["G1", "G2", "G3"]
        assert (run.run_dir / "verification_report.md").is_file()
        assert run.trajectory.records("approval")[-1]["answer"] == {"action": "reject"}
    finally:
        run.close()


def test_approve_continues_to_the_launch_gates(fast_prepare, tmp_path):
    gates = FakeGates()
    run, _ = _paused(fast_prepare, tmp_path, gates)
    try:
        out = run.drive(resume_value={"action": "approve"})
        assert out["exit_status"] == "success"
        assert gates.calls == ["G1", "G2", "G3", "G4", "G5", "G6"]
    finally:
        run.close()


def test_approver_callback_and_launch_edits(fast_prepare, tmp_path):
    gates = FakeGates()
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates, approval=True)
    seen = []

    def approver(payload):
        seen.append(payload)
        return {"action": "edit", "launch": {"nproc_per_node": 4, "not_editable": 1}}

    try:
        out = run.drive(approver)
        assert out["exit_status"] == "success" and [p["kind"] for p in seen] == ["code_execution", "launch"]
        assert run.deps.spec.launch.nproc_per_node == 4
    finally:
        run.close()


def test_a_refused_launch_edit_asks_again_and_a_valid_one_switches_to_slurm(fast_prepare, tmp_path):
    gates = FakeGates()
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates, approval=True)
    answers = iter([{"action": "approve"},  # running the model-written code (G1)
                    {"action": "edit", "launch": {"backend": "slurm", "slurm.partition": "debug; rm -rf ~"}},
                    {"action": "edit", "launch": {"backend": "slurm", "slurm.partition": "debug",
                                                  "slurm.gres": "npu:8"}}])
    seen = []

    def approver(payload):
        seen.append(payload)
        return next(answers)

    try:
        out = run.drive(approver)
        assert out["exit_status"] == "success" and [p["kind"] for p in seen] == ["code_execution", "launch", "launch"]
        seen = seen[1:]
        assert "slurm" not in seen[0]["launch"]  # a local run's approval does not list the slurm fields
        assert "edit refused" in seen[1]["error"] and "partition" in seen[1]["error"]
        launch = run.deps.spec.launch
        assert (launch.backend, launch.slurm.partition, launch.slurm.gres) == ("slurm", "debug", "npu:8")
    finally:
        run.close()


def test_a_resumed_run_finds_its_pending_interrupt(fast_prepare, tmp_path):
    from msmigrate.agent.runner import Run

    gates = FakeGates()
    run, _ = _paused(fast_prepare, tmp_path, gates)
    run.close()
    again = Run.resume(run.run_id, run.settings, policy=ScriptedPolicy(), tools=[], gates=gates.as_dict())
    try:
        assert again.pending_interrupt()["kind"] == "launch"
        out = again.drive(resume_value={"action": "approve"})
        assert out["exit_status"] == "success"
    finally:
        again.close()


def test_a_launch_edit_survives_a_resume_in_a_new_process(fast_prepare, tmp_path):
    """The edit is in the checkpointed state, not only in the first process's memory: a resumed Run (as after a
    Ctrl-C and ``--resume``) launches with the edited settings and shows them at its next approval."""
    from msmigrate.agent.runner import Run

    gates = FakeGates()
    run, _ = _paused(fast_prepare, tmp_path, gates)
    try:
        out = run.drive(resume_value={"action": "edit", "launch": {"nproc_per_node": 4, "gate_train_iters": 9}})
        assert out["exit_status"] == "success" and out["launch_edits"] == {"nproc_per_node": 4, "gate_train_iters": 9}
    finally:
        run.close()
    again = Run.resume(run.run_id, run.settings, policy=ScriptedPolicy(), tools=[], gates=gates.as_dict())
    try:
        assert again.deps.spec.launch.nproc_per_node == 4 and again.deps.spec.launch.gate_train_iters == 9
    finally:
        again.close()



def test_a_gate_refused_for_want_of_approval_is_asked_again_never_classified(fast_prepare, tmp_path):
    """A gate whose checks were refused because the approval is missing (a resumed process that lost it) is no
    failure of the code: the user is asked again, nothing is classified, no repair phase runs over their files."""
    from msmigrate.tools.target_checks import UNAPPROVED

    gates = FakeGates({"G1": [f"plugin does not build on meta: {UNAPPROVED} when the phase ends"]})
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates, approval=True)
    try:
        out = run.drive()
        out = run.drive(resume_value={"action": "approve"})
        assert out["interrupt"]["kind"] == "code_execution" and out["interrupt"]["phase"] == "model"
        assert gates.calls == ["G1"]
        out = run.drive(resume_value={"action": "approve"})
        assert out["interrupt"]["kind"] == "launch" and gates.calls == ["G1", "G1", "G2", "G3"]
        kinds = [json.loads(line)["kind"] for line in (run.ctx.run_dir / "trajectory.jsonl").read_text().splitlines()]
        assert "approval_missing" in kinds and "classify" not in kinds
    finally:
        run.close()


def test_gates_run_with_the_approval_the_state_holds(fast_prepare, tmp_path):
    """run_gates restores the user's answer from the state: the verify node re-running a stale G1 in a resumed
    process (whose context starts unapproved) ran it as unapproved."""
    from msmigrate.agent.nodes.work import run_gates

    seen = []
    gates = FakeGates()
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates, approval=True)
    run.deps.gates["G1"] = lambda deps, state: seen.append(deps.ctx.code_approved) or gates.gate("G1")(deps, state)
    try:
        run.ctx.code_approved = False  # what a new process starts with
        run_gates(run.deps, {"code_approval": {"approved": True, "phase": "model"}, "plan": {}}, "model")
        assert seen == [True]
    finally:
        run.close()
