"""LLMPolicy with an in-process fake chat model: transport retries, format-error re-asks, history fitting and token
accounting. (The HTTP-level test against a fake OpenAI server lives in test_llm_policy_http.py.)"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from agent_fakes import echo_tool
from msmigrate.agent.config import LLMSettings
from msmigrate.agent.policies.base import PolicyError, PolicyView
from msmigrate.agent.policies.llm import CHARS_PER_TOKEN, LLMPolicy, fit_history
from msmigrate.core.run_context import RunContext

REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


class ScriptedChatModel(BaseChatModel):
    """Answers with the scripted replies in order; an exception in the script is raised instead."""

    script: list[Any]
    calls: list[list[Any]] = []
    bound: list[Any] = []

    @property
    def _llm_type(self) -> str:
        return "scripted-fake"

    def bind_tools(self, tools, **kwargs):
        self.bound.append(list(tools))
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.calls.append(list(messages))
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        return ChatResult(generations=[ChatGeneration(message=item)])


def reply(content="", tool_calls=(), invalid=(), total=0) -> AIMessage:
    usage = {"input_tokens": total - 1, "output_tokens": 1, "total_tokens": total} if total else None
    return AIMessage(content=content, tool_calls=list(tool_calls), invalid_tool_calls=list(invalid),
                     usage_metadata=usage)


def conn_error() -> openai.APIConnectionError:
    return openai.APIConnectionError(message="connection refused", request=REQUEST)


@pytest.fixture
def view(tmp_path) -> PolicyView:
    ctx = RunContext(run_id="llm", run_dir=tmp_path, source=Path("/src"), target=Path("/tgt"), model_name="fakevl",
                     runtime_python=sys.executable)
    return PolicyView(phase="model", state={"attempts": {}, "gates": {}}, messages=[], tools=[echo_tool()], ctx=ctx)


def make_policy(script, **llm) -> tuple[LLMPolicy, ScriptedChatModel, list[float]]:
    model = ScriptedChatModel(script=list(script), calls=[], bound=[])
    sleeps: list[float] = []
    return LLMPolicy(model, LLMSettings(**llm), "KNOWLEDGE-INDEX", sleep=sleeps.append), model, sleeps


GOOD_CALL = {"name": "echo", "args": {"text": "hi"}, "id": "c1", "type": "tool_call"}
BAD_CALL = {"name": "echo", "args": '{"text": "hi"', "id": "c2", "error": "Expecting ',' delimiter",
            "type": "invalid_tool_call"}


def test_decide_sends_system_and_phase_prompt_and_counts_tokens(view):
    policy, model, sleeps = make_policy([reply("reading", [GOOD_CALL], total=123)])
    decision = policy.decide(view)
    assert decision.message.tool_calls[0]["args"] == {"text": "hi"}
    assert decision.tokens == 123 and decision.format_errors == 0 and sleeps == []
    (sent,) = model.calls
    assert isinstance(sent[0], SystemMessage) and "KNOWLEDGE-INDEX" in sent[0].content and "echo" in sent[0].content
    assert isinstance(sent[1], HumanMessage) and len(sent) == 2
    assert [t["function"]["name"] for t in model.bound[0]] == ["echo"]  # OpenAI schemas (phase_offer)


def test_missing_usage_metadata_counts_zero_tokens(view):
    policy, _, _ = make_policy([reply("done")])
    assert policy.decide(view).tokens == 0


def test_transport_errors_are_retried_with_backoff(view):
    policy, model, sleeps = make_policy([conn_error(), conn_error(), conn_error(), reply("ok", total=9)],
                                        max_transport_retries=4)
    decision = policy.decide(view)
    assert decision.message.content == "ok" and decision.tokens == 9
    assert sleeps == [1.0, 2.0, 4.0] and len(model.calls) == 4


def test_transport_errors_beyond_the_retries_raise_policy_error(view):
    policy, model, sleeps = make_policy([conn_error()] * 3, max_transport_retries=2)
    with pytest.raises(PolicyError, match="unavailable after 3 tries"):
        policy.decide(view)
    assert sleeps == [1.0, 2.0] and len(model.calls) == 3


def test_timeouts_and_rate_limits_are_transport_errors(view):
    rate = openai.RateLimitError("slow down", response=httpx.Response(429, request=REQUEST), body=None)
    policy, _, sleeps = make_policy([openai.APITimeoutError(REQUEST), rate, reply("ok")])
    assert policy.decide(view).message.content == "ok" and sleeps == [1.0, 2.0]


def test_other_api_errors_are_not_retried(view):
    bad = openai.BadRequestError("bad request", response=httpx.Response(400, request=REQUEST), body=None)
    policy, model, sleeps = make_policy([bad, reply("never")])
    with pytest.raises(openai.BadRequestError):
        policy.decide(view)
    assert sleeps == [] and len(model.calls) == 1


def test_invalid_tool_calls_get_a_format_error_and_are_asked_again(view):
    policy, model, _ = make_policy([reply("", invalid=[BAD_CALL], total=10), reply("fixed", [GOOD_CALL], total=20)])
    decision = policy.decide(view)
    assert decision.message.content == "fixed" and decision.format_errors == 1 and decision.tokens == 30
    first, second = model.calls
    assert second[: len(first)] == first
    bad_turn, feedback = second[len(first):]
    assert isinstance(bad_turn, AIMessage) and not bad_turn.tool_calls and not bad_turn.invalid_tool_calls
    assert isinstance(feedback, HumanMessage)
    assert feedback.content.startswith("Your last tool call could not be executed.")
    assert "`echo`" in feedback.content and "Expecting ',' delimiter" in feedback.content
    assert '"text": "hi"' in feedback.content and '"required"' in feedback.content  # what was sent + the schema


def test_format_error_re_asks_are_bounded(view):
    policy, model, _ = make_policy([reply("", invalid=[BAD_CALL])] * 3, max_format_retries=2)
    with pytest.raises(PolicyError, match="malformed tool calls 3 times"):
        policy.decide(view)
    assert len(model.calls) == 3


def test_classify_fallback_reads_an_owner_word(view):
    view.state["last_failure"] = {"case_id": "old-case", "owner": "data", "diagnosis": "old", "excerpt": "old log"}
    policy, model, _ = make_policy([reply("config — the YAML names a module that does not exist")])
    verdict = policy.classify("weird failure XYZ", view)
    assert verdict["owner"] == "config" and verdict["method"] == "llm"
    (prompt,) = model.calls[0]
    assert "weird failure XYZ" in prompt.content and "old-case" not in prompt.content
    policy, _, _ = make_policy([reply("no idea")])
    assert policy.classify("weird failure", view) is None


# --- fit_history -----------------------------------------------------------------------------------------------

def _history(n_tools: int, size: int) -> list:
    out = [HumanMessage("task")]
    for i in range(n_tools):
        out += [AIMessage(content=f"step {i}", tool_calls=[{**GOOD_CALL, "id": f"t{i}"}]),
                ToolMessage(content=str(i) * size, tool_call_id=f"t{i}")]
    return out


def _size(messages) -> int:
    return sum(len(str(m.content)) for m in messages)


def test_fit_history_keeps_everything_when_it_fits():
    msgs = _history(3, 100)
    assert fit_history(msgs, 24000, 1000) == msgs


def test_fit_history_keeps_many_whole_outputs_while_under_budget():
    msgs = _history(8, 5000)  # ~41k chars with the fixed part: under 12000 tokens * 3.5 chars
    assert fit_history(msgs, 12000, 1000) == msgs


def test_fit_history_cuts_oldest_first_and_only_as_many_as_needed():
    msgs = _history(8, 5000)
    budget = 10000  # 35000 chars: fits once the 2 oldest outputs are cut to 600 chars
    out = fit_history(msgs, budget, 1000)
    tools = [m for m in out if isinstance(m, ToolMessage)]
    assert all(len(t.content) < 720 and "[cut: 4400 chars" in t.content for t in tools[:2])
    assert [t.content for t in tools[2:]] == [m.content for m in msgs if isinstance(m, ToolMessage)][2:]
    assert 1000 + _size(out) <= budget * CHARS_PER_TOKEN
    assert len(msgs[2].content) == 5000, "the input list is not modified"
    assert [type(m) for m in out] == [type(m) for m in msgs]


def test_fit_history_never_cuts_the_newest_turn():
    msgs = _history(2, 100)
    calls = [{**GOOD_CALL, "id": f"n{i}"} for i in range(3)]
    msgs += [AIMessage(content="read three", tool_calls=calls)] + [
        ToolMessage(content="n" * 8000, tool_call_id=c["id"]) for c in calls]
    out = fit_history(msgs, 2000, 1000)  # 7000 chars: the newest 24000 can never fit; they stay whole anyway
    assert [m.content for m in out[-3:]] == ["n" * 8000] * 3


def test_a_cut_output_says_how_to_see_it_again():
    """A cut read_file names the call that shows the rest (from the last line its kept head reached); any other
    cut tool names itself with its arguments. Without the pointer a live player re-read whole files."""
    import json

    read = {"name": "read_file", "args": {"where": "source", "path": "modeling_x.py"}, "id": "r0",
            "type": "tool_call"}
    text = "\n".join(f"{i}: line {i} " + "x" * 40 for i in range(1, 200))
    content = json.dumps({"ok": True, "data": {"path": "modeling_x.py", "start": 1, "text": text}})
    msgs = [HumanMessage("task"), AIMessage(content="read", tool_calls=[read]),
            ToolMessage(content=content, tool_call_id="r0"),
            AIMessage(content="grep", tool_calls=[{**GOOD_CALL, "id": "g0"}]),
            ToolMessage(content="g" * 5000, tool_call_id="g0"),
            AIMessage(content="last", tool_calls=[{**GOOD_CALL, "id": "z"}]), ToolMessage(content="z", tool_call_id="z")]
    out = fit_history(msgs, 500, 0)  # 1750 chars: both older outputs must be cut
    first, second = out[2].content, out[4].content
    kept_lines = [int(n) for n in __import__("re").findall(r"\\n(\d+): ", first)]
    assert first.endswith('to see it again call read_file {"where": "source", "path": "modeling_x.py", '
                          f'"start": {kept_lines[-1]}}}]')
    assert kept_lines[-1] > 1 and f"[cut: {len(content) - 600} chars" in first
    assert second.endswith('to see it again call echo {"text": "hi"}]')


def test_fit_history_cuts_harder_until_the_budget_holds():
    msgs = _history(8, 5000)
    out = fit_history(msgs, 3000, 1000)  # 10500 chars: 600-char heads are not enough, the oldest go down to 120
    tools = [m for m in out if isinstance(m, ToolMessage)]
    assert tools[0].content.startswith("0" * 120 + " …[cut: 4880 chars")
    assert tools[-2].content.startswith("6" * 600 + " …[cut: 4400 chars")
    assert tools[-1].content == "7" * 5000  # the newest turn's output: the model has not seen it yet
    assert 1000 + _size(out) <= 3000 * CHARS_PER_TOKEN
    assert [m.content for m in out if not isinstance(m, ToolMessage)] == \
           [m.content for m in msgs if not isinstance(m, ToolMessage)]
