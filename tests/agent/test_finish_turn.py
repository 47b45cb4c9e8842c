"""finish_phase may close a turn of checks: the phase gate is asked for (``finish_request``) only when every other
call of that turn succeeded; a failed check in the same turn declines it, and the model sees why."""

from __future__ import annotations

import json
from types import SimpleNamespace

from typing import Annotated, TypedDict

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from pydantic import BaseModel, Field

from msmigrate.agent.nodes.tools import make_tools_node
from msmigrate.core.tool_result import ToolResult, make_tool
from msmigrate.tools.phase_tools import FINISH_TOOL, FinishPhaseArgs, finish_phase


class CheckArgs(BaseModel):
    fail: bool = Field(False, description="whether this check fails")


def check(fail: bool = False) -> ToolResult:
    return ToolResult.failure("loss is NaN") if fail else ToolResult.success(loss=1.5)


class Journal:
    def __init__(self):
        self.records = []

    def append(self, kind, **fields):
        self.records.append({"kind": kind, **fields})


class TurnState(TypedDict, total=False):
    messages: Annotated[list, add_messages]
    phase: str
    counters: dict
    finish_request: dict | None


def tools_node():
    """The real tools node in a one-node graph (ToolNode needs the graph's runtime); returns the node's update."""
    tools = [make_tool("check_forward", "a check", CheckArgs, check),
             make_tool(FINISH_TOOL, "finish", FinishPhaseArgs, finish_phase)]
    deps = SimpleNamespace(tools=tools, trajectory=Journal(), emit=lambda *a, **k: None,
                           ctx=SimpleNamespace(code_approved=False))
    graph = StateGraph(TurnState)
    graph.add_node("tools", make_tools_node(deps))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile()

    def run(state, _config):
        final = app.invoke(state)
        return {**{k: v for k, v in final.items() if k != "messages" and v is not None},
                "messages": final["messages"][1:]}  # the tool results, as the node returned them
    return run, deps


def turn(*calls):
    return {"phase": "data", "counters": {}, "messages": [AIMessage(content="", tool_calls=[
        {"name": n, "args": a, "id": f"c{i}", "type": "tool_call"} for i, (n, a) in enumerate(calls)])]}


def test_finish_after_passing_checks_runs_the_gate():
    node, _ = tools_node()
    out = node(turn(("check_forward", {}), (FINISH_TOOL, {"summary": "done", "delivered": ["a.py"]})), {})
    assert out["finish_request"] == {"summary": "done", "delivered": ["a.py"], "decisions_changed": None}
    assert [json.loads(m.content)["ok"] for m in out["messages"]] == [True, True]


def test_finish_after_a_failed_check_is_declined_with_the_reason():
    node, deps = tools_node()
    out = node(turn(("check_forward", {}), ("check_forward", {"fail": True}), (FINISH_TOOL, {"summary": "done"})), {})
    assert "finish_request" not in out  # the work node asks the policy again instead of running the gate
    finish = json.loads(out["messages"][-1].content)
    assert finish["ok"] is False and "check_forward failed in the same turn" in finish["error"]
    assert json.loads(out["messages"][1].content)["error"] == "loss is NaN"  # the failed result goes back whole
    assert [r["failed"] for r in deps.trajectory.records if r["kind"] == "finish_declined"] == [["check_forward"]]
    # the trajectory records the declined answer the model saw, not the tool's own acknowledgement
    logged = [r for r in deps.trajectory.records if r["kind"] == "tool" and r["name"] == FINISH_TOOL]
    assert len(logged) == 1 and logged[0]["result"].startswith('{"ok": false') and logged[0]["status"] == "error"


def test_finish_alone_still_runs_the_gate():
    node, _ = tools_node()
    assert node(turn((FINISH_TOOL, {"summary": "s"})), {})["finish_request"]["summary"] == "s"
