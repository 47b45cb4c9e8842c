"""ReplayPolicy: a recorded trajectory reproduces the same decisions; a divergent run fails with PolicyError."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from agent_fakes import CONFIG_FAILURE, FakeGates, ScriptedPolicy, echo, make_run
from msmigrate.agent.policies.base import PolicyError, PolicyView
from msmigrate.agent.policies.replay import ReplayPolicy


def _decisions(run) -> list[tuple]:
    return [(r["phase"], r["content"], [(c["name"], c["args"], c["id"]) for c in r["tool_calls"]])
            for r in run.trajectory.records("decision")]


@pytest.fixture
def recorded(fast_prepare, tmp_path):
    policy = ScriptedPolicy({"model": [[echo("a"), echo("fail")], [echo("b", times=2)]], "config": [[echo("c")]]})
    run = make_run(fast_prepare, tmp_path / "rec", policy, FakeGates({"G3": [CONFIG_FAILURE]}))
    out = run.drive()
    run.close()
    assert out["exit_status"] == "success"
    return run, out


def test_replay_reproduces_the_recorded_decisions(fast_prepare, tmp_path, recorded):
    rec_run, rec_out = recorded
    replay = ReplayPolicy(rec_run.run_dir / "trajectory.jsonl")
    gates = FakeGates({"G3": [CONFIG_FAILURE]})
    run = make_run(fast_prepare, tmp_path / "rep", replay, gates)
    out = run.drive()
    run.close()
    assert out["exit_status"] == "success", out.get("exit_detail")
    assert _decisions(run) == _decisions(rec_run)
    assert gates.calls == ["G1", "G2", "G3", "G3", "G4", "G5", "G6"]
    assert out["counters"]["policy_steps"] == rec_out["counters"]["policy_steps"]
    assert out["counters"]["tool_calls"] == rec_out["counters"]["tool_calls"]
    rec_results = [r["result"] for r in rec_run.trajectory.records("tool")]
    assert [r["result"] for r in run.trajectory.records("tool")] == rec_results


def test_replay_divergence_raises_policy_error_and_fails_the_run(fast_prepare, tmp_path, recorded):
    rec_run, _ = recorded
    # A different gate outcome: G1 fails once (unclassifiable → back to model), so the run asks for a 4th model
    # decision where the recording's 4th decision was made in phase data.
    replay = ReplayPolicy(rec_run.run_dir / "trajectory.jsonl")
    run = make_run(fast_prepare, tmp_path / "div", replay, FakeGates({"G1": ["hello world, everything fine"]}))
    out = run.drive()
    run.close()
    assert out["exit_status"] == "error"
    assert out["exit_detail"] == ("PolicyError: replay diverged at decision 3: recorded phase data, now model")


def _view(phase: str, steps: int, ctx=None) -> PolicyView:
    return PolicyView(phase=phase, state={"counters": {"policy_steps": steps}}, messages=[], tools=[], ctx=ctx)


def test_replay_unit_behaviour(tmp_path):
    path = tmp_path / "trajectory.jsonl"
    records = [{"kind": "drive"},
               {"kind": "decision", "phase": "model", "content": "read", "tool_calls": [
                   {"name": "echo", "args": {"text": "a"}, "id": "call_1"}]},
               {"kind": "tool", "name": "echo"},
               {"kind": "decision", "phase": "model", "content": "done", "tool_calls": []}]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    policy = ReplayPolicy(path)
    first = policy.decide(_view("model", 0)).message
    assert isinstance(first, AIMessage) and first.content == "read"
    assert first.tool_calls == [{"name": "echo", "args": {"text": "a"}, "id": "call_1", "type": "tool_call"}]
    assert policy.decide(_view("model", 1)).message.tool_calls == []
    with pytest.raises(PolicyError, match="diverged at decision 1: recorded phase model, now data"):
        policy.decide(_view("data", 1))
    with pytest.raises(PolicyError, match="exhausted after 2 decisions"):
        policy.decide(_view("model", 2))
    assert policy.classify("anything", _view("model", 0)) is None


def test_replay_of_an_empty_trajectory_is_refused(tmp_path):
    path = Path(tmp_path / "t.jsonl")
    path.write_text(json.dumps({"kind": "drive"}) + "\n")
    with pytest.raises(PolicyError, match="no decisions"):
        ReplayPolicy(path)
