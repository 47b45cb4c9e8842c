"""A phase the policy cannot do ends the run at once with ``unsupported_by_policy`` (what, why, what to do on the
report's first line); a gate that failed twice on an identical target is not run a third time."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from agent_fakes import CONFIG_FAILURE, FakeGates, ScriptedPolicy, make_run
from msmigrate.agent.policies.base import Decision, PhaseUnsupported


class DecliningPolicy(ScriptedPolicy):
    """Does the model phase, then finds the data phase beyond it (as the rules policy does for what it cannot
    derive)."""

    def decide(self, view):
        if view.phase == "data":
            self.views.append(view)
            exc = PhaseUnsupported("data branch B (media expansion)", "the processor shows no image placeholder")
            return Decision(message=AIMessage(content=exc.line), unsupported=exc.line)
        return super().decide(view)


def test_declined_phase_ends_the_run_in_one_step(fast_prepare, tmp_path):
    gates, policy = FakeGates(), DecliningPolicy()
    run = make_run(fast_prepare, tmp_path, policy, gates)
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["exit_status"] == "unsupported_by_policy"
    assert gates.calls == ["G1"]  # G2 never ran on the half-done data phase, nothing bounced through classify
    assert [v.phase for v in policy.views] == ["model", "data"]
    assert not run.trajectory.records("classify")
    first = (run.run_dir / "verification_report.md").read_text().splitlines()[0]
    assert first.startswith("**unsupported_by_policy**") and "data phase" in first
    assert "media expansion" in first and "no image placeholder" in first and "--policy llm" in first


def test_gate_failing_twice_on_the_same_target_is_not_run_again(fast_prepare, tmp_path):
    gates = FakeGates({"G3": [CONFIG_FAILURE] * 10})  # the scripted policy edits nothing: same commit every time
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates, budgets={"phase_attempts": 6})
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["exit_status"] == "gates_failed" and gates.count["G3"] == 2
    assert "identical target" in out["exit_detail"] and "not run again" in out["exit_detail"]
    assert [r["gate"] for r in run.trajectory.records("gate_skipped")] == ["G3"]


PORT_FAILURE = ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
                "address. port: 41234, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use")


class PortFlakyGates(FakeGates):
    """G6 fails twice on a taken master port, as the training gates record it after the launcher's own relaunch
    collided too (``infrastructure``), then passes."""

    def gate(self, name: str):
        run = super().gate(name)

        def flagged(deps, state):
            record = run(deps, state)
            if not record["passed"] and "EADDRINUSE" in record["failure_text"]:
                record["infrastructure"] = "the master port was taken before torchrun bound it, on every attempt"
            return record

        return flagged


def test_port_collisions_are_not_failures_on_the_same_target(fast_prepare, tmp_path):
    gates = PortFlakyGates({"G6": [PORT_FAILURE, PORT_FAILURE]})  # nothing edited in between: the same commit
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates, budgets={"phase_attempts": 6})
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["exit_status"] == "success", out.get("exit_detail")
    assert gates.count["G6"] == 3 and not run.trajectory.records("gate_skipped")
