"""Routing of the compiled graph with a scripted policy, a fake tool and fake gates (no LLM, no launches)."""

from __future__ import annotations

import json

from langchain_core.messages import ToolMessage

from agent_fakes import CONFIG_FAILURE, FakeGates, ScriptedPolicy, echo, make_run


def drive(run, **kw):
    try:
        return run.drive(**kw)
    finally:
        run.close()


def test_happy_path_reaches_report_with_success(fast_prepare, tmp_path):
    gates = FakeGates()
    policy = ScriptedPolicy({"model": [[echo("a")], [echo("b")]], "data": [[echo("c")]]})
    run = make_run(fast_prepare, tmp_path, policy, gates)
    out = drive(run)
    assert out["exit_status"] == "success", out.get("exit_detail")
    assert out["phase"] == "done"
    assert gates.calls == ["G1", "G2", "G3", "G4", "G5", "G6"]
    assert [v.phase for v in policy.views] == ["model", "model", "model", "data", "data", "config"]
    assert out["counters"]["policy_steps"] == 6 and out["counters"]["tool_calls"] == 3
    assert out["counters"]["tokens"] == 30 and out["counters"]["launches"] == 3
    assert out["plan"]["model_id"] == "fakevl" and out["plan"]["route"] == "transformers"
    assert (run.run_dir / "verification_report.md").is_file() and (run.run_dir / "evidence.json").is_file()
    kinds = [r["kind"] for r in run.trajectory.records()]
    assert kinds[0] == "drive" and kinds[-1] == "exit" and kinds.count("decision") == 6 and kinds.count("tool") == 3
    assert [r["tokens"] for r in run.trajectory.records("decision")] == [5] * 6


def test_config_failure_is_classified_and_retried_in_config(fast_prepare, tmp_path):
    gates = FakeGates({"G3": [CONFIG_FAILURE, None]})
    policy = ScriptedPolicy()
    run = make_run(fast_prepare, tmp_path, policy, gates)
    out = drive(run)
    assert out["exit_status"] == "success", out.get("exit_detail")
    assert gates.calls == ["G1", "G2", "G3", "G3", "G4", "G5", "G6"]
    assert [v.phase for v in policy.views] == ["model", "data", "config", "config"]
    # the retry of config saw classify's verdict in its state
    retry = policy.views[-1].state
    assert retry["last_failure"]["owner"] == "config" and retry["last_failure"]["gate"] == "G3"
    assert retry["last_failure"]["case_id"] == "fsdp-apply-modules-no-match"
    assert out["attempts"] == {"config": 1}
    classified = run.trajectory.records("classify")
    assert [(c["gate"], c["route"], c["method"]) for c in classified] == [("G3", "config", "regex")]


def test_failure_in_verify_routes_to_owner_phase(fast_prepare, tmp_path):
    gates = FakeGates({"G4": [CONFIG_FAILURE]})
    policy = ScriptedPolicy()
    out = drive(make_run(fast_prepare, tmp_path, policy, gates))
    assert out["exit_status"] == "success"
    assert gates.calls == ["G1", "G2", "G3", "G4", "G3", "G4", "G5", "G6"]


def test_attempts_exhausted_ends_with_gates_failed(fast_prepare, tmp_path, repairs_change_target):
    gates = FakeGates({"G3": [CONFIG_FAILURE] * 10})
    out = drive(make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates, budgets={"phase_attempts": 2}))
    assert out["exit_status"] == "gates_failed"
    assert gates.count["G3"] == 3  # first try + 2 attempts
    assert "G3 still failing after 2 attempts of phase config" in out["exit_detail"]
    assert "fsdp-apply-modules-no-match" in out["exit_detail"]
    assert "G4" not in gates.calls


def test_unclassifiable_failure_returns_to_the_gate_phase(fast_prepare, tmp_path):
    gates = FakeGates({"G2": ["hello world, everything fine"]})
    policy = ScriptedPolicy()
    run = make_run(fast_prepare, tmp_path, policy, gates)
    out = drive(run)
    assert out["exit_status"] == "success"
    assert [v.phase for v in policy.views] == ["model", "data", "data", "config"]
    assert run.trajectory.records("classify")[0]["method"] == "gate-default"


def test_policy_steps_budget_exits_cleanly(fast_prepare, tmp_path):
    policy = ScriptedPolicy(loop=True)
    out = drive(make_run(fast_prepare, tmp_path, policy, budgets={"policy_steps": 3}))
    assert out["exit_status"] == "budget_exhausted"
    assert "policy steps budget (3)" in out["exit_detail"] and "phase model" in out["exit_detail"]
    assert out["counters"]["policy_steps"] == 3 and len(policy.views) == 3


def test_token_budget_exits_cleanly(fast_prepare, tmp_path):
    policy = ScriptedPolicy(loop=True, tokens=400)
    out = drive(make_run(fast_prepare, tmp_path, policy, budgets={"tokens": 1000}))
    assert out["exit_status"] == "budget_exhausted" and "token budget (1000)" in out["exit_detail"]


def test_wall_time_budget_exits_cleanly(fast_prepare, tmp_path):
    policy = ScriptedPolicy()
    out = drive(make_run(fast_prepare, tmp_path, policy, budgets={"wall_seconds": 1e-6}))
    assert out["exit_status"] == "budget_exhausted" and "wall-time budget" in out["exit_detail"]
    assert policy.views == []


def test_tool_that_raises_becomes_an_error_observation(fast_prepare, tmp_path):
    policy = ScriptedPolicy({"model": [[echo("boom")]]})
    run = make_run(fast_prepare, tmp_path, policy)
    out = drive(run)
    assert out["exit_status"] == "success"  # one bad call does not end the run
    (obs,) = policy.tool_messages("model")
    result = json.loads(obs.content)
    assert result["ok"] is False and "RuntimeError: echo tool bug: boom" in result["error"]
    assert result["data"]["exception"] == "RuntimeError" and "echo_core" in result["data"]["traceback_tail"]
    assert not (run.run_dir / "error.txt").exists()


def test_a_bug_fails_the_run_once_and_resume_does_not_replay_the_call(fast_prepare, tmp_path):
    """A tool outside the wrapper (its bug escapes ToolNode) fails the run with a clear status; --resume answers
    the pending call with an error observation instead of running it again, and the run goes on."""
    from langchain_core.tools import StructuredTool

    from msmigrate.agent.runner import Run
    from msmigrate.agent.policies.base import tool_call

    calls = []

    def raw(text: str) -> str:
        calls.append(text)
        raise RuntimeError("raw tool bug")

    raw_tool = StructuredTool.from_function(func=raw, name="raw", description="raises")
    policy = ScriptedPolicy({"model": [[tool_call("raw", {"text": "x"})]]})
    run = make_run(fast_prepare, tmp_path, policy, tools=[raw_tool])
    out = drive(run)
    assert out["exit_status"] == "error" and "raw tool bug" in out["exit_detail"]
    assert "RuntimeError" in (run.run_dir / "error.txt").read_text() and calls == ["x"]
    run.close()
    again = Run.resume(run.run_id, run.settings, policy=policy, tools=[raw_tool], gates=run.deps.gates)
    try:
        out = again.drive()
        assert out["exit_status"] == "success" and calls == ["x"]  # not replayed
        (obs,) = policy.tool_messages("model")
        assert "not replayed" in json.loads(obs.content)["error"]
        assert again.trajectory.records("not_replayed")[0]["calls"] == ["raw"]
    finally:
        again.close()


def test_expected_tool_failure_goes_back_to_the_policy(fast_prepare, tmp_path):
    policy = ScriptedPolicy({"model": [[echo("fail")]]})
    out = drive(make_run(fast_prepare, tmp_path, policy))
    assert out["exit_status"] == "success"
    (obs,) = policy.tool_messages("model")
    result = json.loads(obs.content)
    assert result["ok"] is False and "refused" in result["error"]


def test_schema_failing_arguments_get_the_format_error_observation(fast_prepare, tmp_path):
    from msmigrate.agent.policies.base import tool_call

    policy = ScriptedPolicy({"model": [[tool_call("echo", {"txt": "hi"})], [echo("x", times=0)]]})
    run = make_run(fast_prepare, tmp_path, policy)
    out = drive(run)
    assert out["exit_status"] == "success", out.get("exit_detail")
    obs = policy.tool_messages("model")
    assert len(obs) == 2 + 1  # the second view repeats the first observation
    first, second = obs[0], obs[-1]
    for msg, field in ((first, "text"), (second, "times")):
        assert isinstance(msg, ToolMessage) and msg.status == "error"
        assert msg.content.startswith("Your last tool call could not be executed.")
        assert "`echo`" in msg.content and field in msg.content
        assert '"required"' in msg.content  # the schema is shown
    assert '"txt": "hi"' in first.content
    tool_records = run.trajectory.records("tool")
    assert [r["status"] for r in tool_records] == ["error", "error"]


def test_unknown_tool_is_answered_not_fatal(fast_prepare, tmp_path):
    from msmigrate.agent.policies.base import tool_call

    policy = ScriptedPolicy({"model": [[tool_call("no_such_tool", {})]]})
    out = drive(make_run(fast_prepare, tmp_path, policy))
    assert out["exit_status"] == "success"
    (obs,) = policy.tool_messages("model")
    assert obs.status == "error" and "no_such_tool" in obs.content
