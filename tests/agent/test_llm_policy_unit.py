"""LLMPolicy over real HTTP (langchain-openai + the openai client) against the scripted endpoint, one decision at a
time (no gates, no launches): 503 → retry, outage → PolicyError, a malformed tool call → format-error observation in
a conversation an OpenAI server accepts, and the classify fallback. test_policy_llm.py covers the same logic with an
in-process fake; these prove the wire format."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_openai_server import ScriptedChatServer, sequence_error  # noqa: E402

from msmigrate.agent.config import LLMSettings, Settings  # noqa: E402
from msmigrate.agent.policies.base import PolicyError, PolicyView  # noqa: E402
from msmigrate.agent.policies.llm import LLMPolicy, build_chat_model, log_excerpt  # noqa: E402
from msmigrate.agent.runner import build_tools  # noqa: E402
from msmigrate.core.run_context import RunContext  # noqa: E402

READ = {"name": "read_file", "arguments": {"where": "source", "path": "config.json"}}


def make_policy(server: ScriptedChatServer, sleeps: list[float], retries: int = 4) -> LLMPolicy:
    llm = LLMSettings(base_url=server.base_url, model="scripted", timeout_s=10, max_transport_retries=retries)
    return LLMPolicy(build_chat_model(llm, Settings(llm_api_key="sk-test")), llm, sleep=sleeps.append)


@pytest.fixture()
def view(tmp_path) -> PolicyView:
    ctx = RunContext(run_id="unit", run_dir=tmp_path / "run", source=tmp_path / "src", target=tmp_path / "tgt",
                     model_name="patchlm")
    plan = {"route": "custom", "data_branch": "B", "model_id": "patchlm", "template": "patchlm", "collator": "qwen3vl",
            "similar_case": "examples/qwen3vl/qwen3vl_config.yaml", "reasons": ["custom code"]}
    state = {"attempts": {}, "gates": {}, "plan": plan}
    return PolicyView(phase="model", state=state, messages=[], tools=build_tools(ctx), ctx=ctx)


def test_transport_errors_are_retried_with_backoff(view):
    sleeps: list[float] = []
    with ScriptedChatServer({"model": [{"tool_calls": [READ]}]}, fail_first=2) as server:
        decision = make_policy(server, sleeps).decide(view)
    assert server.statuses == [503, 503, 200]
    assert sleeps == [1.0, 2.0]
    assert [c["name"] for c in decision.message.tool_calls] == ["read_file"]
    assert decision.message.tool_calls[0]["args"] == READ["arguments"]
    assert decision.tokens > 0 and decision.format_errors == 0
    offered = {t["function"]["name"] for t in server.requests[-1]["tools"]}
    assert {"write_file", "edit_file", "check_forward"} <= offered
    assert server.requests[-1]["messages"][1]["content"].startswith("# Phase: model")


def test_non_json_200_bodies_are_retried_like_transport_errors(view):
    sleeps: list[float] = []
    with ScriptedChatServer({"model": [{"tool_calls": [READ]}]}, garbage_first=2) as server:
        decision = make_policy(server, sleeps).decide(view)
    assert server.statuses == [-200, -200, 200]  # an HTML page labelled as HTML, then one labelled as JSON
    assert sleeps == [1.0, 2.0]
    assert [c["name"] for c in decision.message.tool_calls] == ["read_file"]


def test_non_json_bodies_past_the_retries_end_with_a_clear_policy_error(view):
    with ScriptedChatServer({"model": [{"tool_calls": [READ]}]}, garbage_first=10) as server:
        with pytest.raises(PolicyError, match="body that is not a chat completion after 3 tries"):
            make_policy(server, [], retries=2).decide(view)


def test_outage_after_retries_is_a_policy_error(view):
    with ScriptedChatServer({"model": [{"tool_calls": [READ]}]}, fail_first=10) as server:
        with pytest.raises(PolicyError, match="unavailable after 2 tries"):
            make_policy(server, [], retries=1).decide(view)


def test_malformed_tool_call_gets_format_error_then_retry(view):
    with ScriptedChatServer({"model": [{"content": "reading", "malformed": True, "tool_calls": [READ]}]}) as server:
        decision = make_policy(server, []).decide(view)
    assert decision.format_errors == 1
    assert [c["name"] for c in decision.message.tool_calls] == ["read_file"]
    assert server.statuses == [200, 200]  # the retry's conversation is one an OpenAI server accepts
    retry = server.requests[1]["messages"]
    assert retry[-2]["role"] == "assistant" and not retry[-2].get("tool_calls")
    feedback = retry[-1]["content"]
    assert retry[-1]["role"] == "user" and "could not be executed" in feedback
    assert "`read_file`" in feedback and '"path"' in feedback  # names the tool and shows its schema


def test_server_rejects_unanswered_tool_calls():
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    assert "c1" in sequence_error([{"role": "assistant", "tool_calls": [call]}, {"role": "user", "content": "x"}])
    assert sequence_error([{"role": "assistant", "tool_calls": [call]},
                           {"role": "tool", "tool_call_id": "c1", "content": "{}"}]) is None


def test_classify_fallback_asks_the_endpoint(view):
    with ScriptedChatServer({}, classify_reply="The owner is data: the template is missing.") as server:
        verdict = make_policy(server, []).classify("ValueError: Template None does not exist.", view)
    assert verdict["owner"] == "data" and verdict["method"] == "llm"
    prompt = server.requests[0]["messages"][0]["content"]
    assert "Template None does not exist." in prompt and "tools" not in server.requests[0]



def test_classify_outside_a_run_leaves_out_the_run_sections(view):
    evidence = {"gate": "unknown", "root_cause": {"kind": "exception", "text": "ValueError: bad", "evidence": "x"}}
    with ScriptedChatServer({}, classify_reply='{"owner": "unknown", "fits": ["data", "config"]}') as server:
        make_policy(server, []).classify("ValueError: bad", view, evidence=evidence)
        in_run = PolicyView(phase="classify", ctx=view.ctx, messages=[], tools=[],
                            state={**view.state, "gate_history": [{"gate": "G2", "passed": False}]})
        make_policy(server, []).classify("ValueError: bad", in_run, evidence={**evidence, "gate": "G2"})
    outside, inside = (r["messages"][0]["content"] for r in server.requests)
    # no gate ran: no plan, gate list, attempt or failed gate stands in for a run that does not exist
    assert "outside a migration run" in outside and "## The log" in outside
    assert not any(s in outside for s in ("## Plan", "## Gate results", "attempt 1 of", "failed gate:",
                                          "## Last failure"))
    assert "## Plan" in inside and "## Gate results" in inside and "- failed gate: G2" in inside
    assert "outside a migration run" not in inside and "## Last failure" in inside


def test_a_long_log_is_shown_by_its_head_and_its_tail():
    lines = [f"line {i:04d} " + "x" * 40 for i in range(400)]
    text = "\n".join(["torchrun --nproc_per_node 8 train.py --seq_len 8192"] + lines + ["ValueError: the end"])
    shown = log_excerpt(text)
    head, marker, tail = shown.split("\n[... ", 1)[0], shown.split("\n[... ", 1)[1].split("\n", 1)[0], \
        shown.split("\n[... ", 1)[1].split("\n", 1)[1]
    assert head.startswith("torchrun --nproc_per_node 8") and tail.endswith("ValueError: the end")
    assert len(shown) <= 4000 + 40
    left_out = int(marker.split()[0])
    # every line is either shown whole or counted as left out
    assert len(head.splitlines()) + left_out + len(tail.splitlines()) == len(text.splitlines())
    assert all(line in text.splitlines() for line in head.splitlines() + tail.splitlines())
    assert log_excerpt("short\nlog") == "short\nlog"
