"""Shared shape of every tool: a pure core returning a result dataclass, and a thin LangChain wrapper.

Two tiers of failure (DESIGN decision 9):
- expected failures (bad path, invalid YAML, non-zero exit) are *results* with ``ok=False`` and ``error`` set;
  the policy sees them as an observation and can react;
- anything a tool core raises is caught at the tool boundary (``make_tool``, one of the two places a catch-all is
  allowed) and becomes an error observation naming the exception, so one bad call (an OS error on a path, a bug in a
  probe wrapper) never ends the run, and a resume never hits it again; the trajectory keeps the traceback's tail.
"""

from __future__ import annotations

import dataclasses
import json
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel


@dataclass
class ToolResult:
    """What every tool core returns. ``data`` is JSON-serialisable; ``error`` is a one-paragraph explanation."""

    ok: bool
    data: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @classmethod
    def success(cls, **data: Any) -> "ToolResult":
        return cls(ok=True, data=data)

    @classmethod
    def failure(cls, error: str, **data: Any) -> "ToolResult":
        return cls(ok=False, data=data, error=error)

    def to_json(self, max_chars: int = 12000) -> str:
        """The observation a policy sees: compact JSON, bounded so one tool result cannot flood a prompt."""
        text = json.dumps(dataclasses.asdict(self), default=str, ensure_ascii=False)
        if len(text) <= max_chars:
            return text
        head, tail = text[: max_chars * 3 // 4], text[-max_chars // 4 :]
        return f"{head} …[{len(text) - max_chars} chars cut]… {tail}"


def exception_result(name: str, exc: BaseException) -> ToolResult:
    """The error observation for an exception raised inside tool ``name``."""
    from msmigrate.core.secret_mask import mask_text

    tail = traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:]
    return ToolResult.failure(mask_text(f"tool {name} raised {type(exc).__name__}: {exc}"), exception=type(exc).__name__,
                              traceback_tail=mask_text("".join(tail))[-1500:])


def make_tool(name: str, description: str, args_schema: type[BaseModel], core: Callable[..., ToolResult]):
    """Wrap a core function as a LangChain ``StructuredTool`` whose output is the result's JSON.

    The import is local so that tool cores (and their tests) never need langchain.
    """
    from langchain_core.tools import StructuredTool

    def _run(**kwargs: Any) -> str:
        try:
            return core(**kwargs).to_json()
        except Exception as exc:  # boundary: the tool call (see module docstring)
            from langgraph.errors import GraphBubbleUp

            if isinstance(exc, GraphBubbleUp):  # an interrupt (approval) is control flow, not a failure
                raise
            return exception_result(name, exc).to_json()

    return StructuredTool.from_function(func=_run, name=name, description=description, args_schema=args_schema)
