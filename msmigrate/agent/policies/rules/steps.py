"""Reading a phase conversation: which step we are at, and what the last tool calls returned."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from msmigrate.agent.policies.base import write  # noqa: F401  (the rules phases import it from here)

def step_of(messages: list) -> int:
    return sum(isinstance(m, AIMessage) for m in messages)


def last_results(messages: list) -> dict[str, dict[str, Any]]:
    """Tool name → parsed result of the calls answered since the last decision."""
    out: dict[str, dict[str, Any]] = {}
    names = {}
    for m in messages:
        if isinstance(m, AIMessage):
            names = {c["id"]: c["name"] for c in m.tool_calls}
            out = {}
        elif isinstance(m, ToolMessage):
            try:
                parsed = json.loads(str(m.content))
            except json.JSONDecodeError:
                parsed = {"ok": False, "error": str(m.content), "data": {}}
            out[names.get(m.tool_call_id, m.tool_call_id)] = parsed
    return out

