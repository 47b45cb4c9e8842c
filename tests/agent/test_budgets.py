"""Budget checks: each limit gives a clear reason; nothing is exhausted below the limits."""

from __future__ import annotations

import time

import pytest

from msmigrate.agent.budgets import bump, exhausted
from msmigrate.agent.config import Budgets

B = Budgets(policy_steps=10, tokens=1000, launches=3, wall_seconds=60)


def state(**counters):
    return {"counters": counters, "started_at": time.time()}


def test_fresh_state_is_not_exhausted():
    assert exhausted({}, B) is None
    assert exhausted(state(policy_steps=9, tokens=1000, launches=3), B) is None  # tokens/launches: over, not at


@pytest.mark.parametrize("counters, reason", [
    ({"policy_steps": 10}, "policy steps budget (10) used up"),
    ({"tokens": 1001}, "token budget (1000) used up"),
    ({"launches": 4}, "launch budget (3) used up"),
])
def test_each_counter_limit(counters, reason):
    assert exhausted(state(**counters), B) == reason


def test_wall_time_limit():
    assert exhausted({"counters": {}, "started_at": time.time() - 61}, B) == "wall-time budget (60s) used up"
    assert exhausted({"counters": {}, "started_at": time.time() - 59}, B) is None


def test_bump_adds_without_mutating():
    before = {"policy_steps": 1.0}
    after = bump(before, policy_steps=1, tokens=7)
    assert after == {"policy_steps": 2.0, "tokens": 7} and before == {"policy_steps": 1.0}
    assert bump(None, launches=1) == {"launches": 1}


def test_launch_budget_stops_before_verify(fast_prepare, tmp_path, repairs_change_target):
    from agent_fakes import CONFIG_FAILURE, FakeGates, ScriptedPolicy, make_run

    # every G4 failure costs a launch and sends the run back to config; the launch budget ends it cleanly
    gates = FakeGates({"G4": [CONFIG_FAILURE] * 10})
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates, budgets={"launches": 2, "phase_attempts": 9})
    out = run.drive()
    run.close()
    assert out["exit_status"] == "budget_exhausted" and "launch budget (2)" in out["exit_detail"]
    assert gates.count["G4"] == 3


def test_idle_seconds_from_the_trajectory():
    from msmigrate.agent.budgets import idle_seconds

    records = [{"t": 100.0, "kind": "drive", "resumed": False}, {"t": 150.0, "kind": "gate"},
               {"t": 160.0, "kind": "paused"},
               {"t": 4360.0, "kind": "drive", "resumed": True},  # answered 70 minutes later
               {"t": 4370.0, "kind": "approval_wait", "seconds": 30.0}, {"t": 4400.0, "kind": "gate"}]
    assert idle_seconds(records) == 4200.0 + 30.0


def test_a_run_approved_70_minutes_after_its_pause_keeps_its_wall_budget(fast_prepare, tmp_path, monkeypatch):
    """Exit 3 at the launch approval, approved 70 minutes later: the hour of waiting is not the run's time, so
    it runs G4–G6 instead of ending budget_exhausted — while its own time still counts."""
    from agent_fakes import FakeGates, ScriptedPolicy, make_run

    gates = FakeGates()
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates, approval=True,
                   budgets={"wall_seconds": 3600})
    try:
        assert run.drive()["interrupt"]["kind"] == "code_execution"
        out = run.drive(resume_value={"action": "approve"})
        assert out["exit_status"] == "awaiting_approval" and out["interrupt"]["kind"] == "launch"
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + 70 * 60)
        assert exhausted(run.snapshot(), run.spec.budgets) is not None  # what counting the wait would say
        out = run.drive(resume_value={"action": "approve"})
        assert out["exit_status"] == "success", out.get("exit_detail")
        assert gates.calls[-3:] == ["G4", "G5", "G6"]
        assert run.deps.idle_s >= 70 * 60
        assert exhausted(run.snapshot(), run.spec.budgets, run.deps.idle_s) is None
    finally:
        run.close()
