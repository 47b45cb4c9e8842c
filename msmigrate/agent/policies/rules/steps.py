"""Reading a phase conversation: which step we are at, and what the last tool calls returned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from msmigrate.agent.policies.base import tool_call

TEMPLATES = Path(__file__).parent / "templates"


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


def render_template(template_file: str, **values: Any) -> str:
    """A template rendered; generated Python comes out formatted by the framework's own formatter (black, its
    ``lint`` extra), so a new file or an added block is clean under it."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined, keep_trailing_newline=True)
    env.filters["py"] = repr  # a Python literal (tojson would write null / true into generated Python)
    text = env.get_template(template_file).render(**values)
    return framework_style(text) if template_file.endswith(".py.j2") else text


def framework_style(code: str) -> str:
    """``code`` as black writes it (default settings, as MindSpeed-MM's pyproject leaves them); the blank lines that
    separate an added block from what precedes it are kept."""
    import black

    body = code.lstrip("\n")
    return code[: len(code) - len(body)] + black.format_str(body, mode=black.Mode())


def write(path: str, content: str, reason: str) -> dict[str, Any]:
    return tool_call("write_file", {"path": path, "content": content, "reason": reason}, prefix="rules")
