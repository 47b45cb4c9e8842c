"""The gates-only policy behind ``msmigrate verify``: no edits, every phase straight to its gate."""

from __future__ import annotations

from agent_fakes import FakeGates, make_run

from msmigrate.agent.policies.gates_only import GatesOnlyPolicy


def test_verify_only_runs_every_gate_and_edits_nothing(fast_prepare, tmp_path):
    gates = FakeGates()
    run = make_run(fast_prepare, tmp_path, GatesOnlyPolicy(), gates)
    out = run.drive()
    run.close()
    assert out["exit_status"] == "success"
    assert gates.calls == ["G1", "G2", "G3", "G4", "G5", "G6"]
    assert out["counters"].get("tool_calls", 0) == 0


def test_verify_only_reports_the_failing_gate(fast_prepare, tmp_path):
    gates = FakeGates({"G3": ["[misplaced-key] model.loss_cfg: not a field of model"] * 3})
    run = make_run(fast_prepare, tmp_path, GatesOnlyPolicy(), gates, budgets={"phase_attempts": 1})
    out = run.drive()
    run.close()
    assert out["exit_status"] == "gates_failed" and "G3" in out["exit_detail"]
    assert "G4" not in gates.calls
