"""Runs the tool calls the policy proposed (LangGraph's prebuilt ToolNode) and records them.

Error tiers (DESIGN decision 9): a tool's *expected* failure is already a result with ``ok: false``; a call the
model got wrong (unknown tool, arguments that fail the schema) is answered with the format-error observation;
anything a tool core raises is turned into an error observation by the tool wrapper (``tools/base.make_tool``).
The calls of one decision run one at a time, in order (``max_concurrency=1``): tools share the work tree and git
index, and CPython's ``ast.parse`` (outline, file_writer) proved not thread-safe here."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolInvocationError

from msmigrate.agent.budgets import bump
from msmigrate.agent.deps import RunDeps
from msmigrate.core.tool_result import ToolResult
from msmigrate.prompts.render import render
from msmigrate.tools.phase_tools import FINISH_TOOL


def tool_schema(tools: list, name: str) -> str:
    """The argument schema of tool ``name`` as JSON, or the list of known tool names when there is no such tool."""
    for t in tools:
        if t.name == name:
            return json.dumps(t.tool_call_schema.model_json_schema(), ensure_ascii=False)
    return json.dumps({"known_tools": [t.name for t in tools]})


def failed_call(res: ToolMessage) -> bool:
    """A call of this turn that did not do its job: a format error, or a tool result with ``ok: false``."""
    return res.status == "error" or str(res.content).startswith('{"ok": false')


def declined_finish(res: ToolMessage, failed: list[str]) -> ToolMessage:
    """finish_phase closes a turn of checks only when every other call of the turn succeeded: a check that failed
    in the same turn means the gate would fail on what the model has not seen yet, so the gate does not run and
    the model gets the failed results instead (one request saved when the checks pass, none lost when not)."""
    text = ToolResult.failure(f"finish_phase declined: {', '.join(failed)} failed in the same turn, so the phase "
                              f"gate did not run; read those results, fix, then call finish_phase again").to_json()
    return res.model_copy(update={"content": text, "status": "error"})


def make_tools_node(deps: RunDeps):
    # ToolNode re-raises a pydantic ValidationError of the arguments as ToolInvocationError, and catches only the
    # exception type this handler is annotated with: every other exception (a bug) still propagates.
    def on_invalid_args(exc: ToolInvocationError) -> str:
        error = "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}" for e in exc.filtered_errors or [])
        raw = json.dumps(exc.tool_kwargs, default=str, ensure_ascii=False)
        return render("format_error", tool_name=exc.tool_name, error=error or str(exc.source),
                      schema=tool_schema(deps.tools, exc.tool_name), raw_call=raw[:2000])

    tool_node = ToolNode(deps.tools, handle_tool_errors=on_invalid_args)

    def node(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        deps.ctx.code_approved = bool((state.get("code_approval") or {}).get("approved"))
        deps.ctx.plan_editable = list((state.get("plan") or {}).get("editable_extra") or [])
        deps.ctx.plan = dict(state.get("plan") or {})
        last = state["messages"][-1]
        assert isinstance(last, AIMessage) and last.tool_calls, "tools node reached without tool calls"
        out = tool_node.invoke({"messages": state["messages"]}, {**config, "max_concurrency": 1})
        results: list[ToolMessage] = out["messages"]
        by_id = {c["id"]: c for c in last.tool_calls}
        finish = [c for c in last.tool_calls if c["name"] == FINISH_TOOL and isinstance(c.get("args"), dict)]
        failed = [name for r in results if failed_call(r)
                  and (name := by_id.get(r.tool_call_id, {}).get("name") or "?") != FINISH_TOOL]
        if finish and failed:  # the declined answer is what the model sees, so it is what the trajectory records
            results = [declined_finish(r, failed) if by_id.get(r.tool_call_id, {}).get("name") == FINISH_TOOL
                       else r for r in results]
        for res in results:
            call = by_id.get(res.tool_call_id, {})
            deps.trajectory.append("tool", phase=state.get("phase"), name=call.get("name"), args=call.get("args"),
                                   id=res.tool_call_id, result=str(res.content)[:8000], status=res.status)
            deps.emit("tool", name=call.get("name"), status=res.status, result=str(res.content)[:300])
        if finish and failed:
            deps.trajectory.append("finish_declined", phase=state.get("phase"), failed=failed)
        update: dict[str, Any] = {"messages": results, "counters": bump(state.get("counters"), tool_calls=len(results))}
        if finish and not failed:  # the work node runs the phase gate next, without another policy decision
            update["finish_request"] = {k: finish[-1]["args"].get(k) for k in ("summary", "delivered",
                                                                              "decisions_changed")}
        return update

    return node
