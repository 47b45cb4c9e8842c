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
