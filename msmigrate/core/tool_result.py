"""Shared shape of every tool: a pure core returning a result dataclass, and a thin LangChain wrapper.

Two tiers of failure (DESIGN decision 9):
- expected failures (bad path, invalid YAML, non-zero exit) are *results* with ``ok=False`` and ``error`` set;
  the policy sees them as an observation and can react;
- anything a tool core raises is caught at the tool boundary (``make_tool``, one of the two places a catch-all is
  allowed) and becomes an error observation naming the exception, so one bad call (an OS error on a path, a bug in a
  probe wrapper) never ends the run, and a resume never hits it again; the trajectory keeps the traceback's tail.

Every call has a wall-clock bound (``TOOL_CALL_SECONDS``, or the tool's own: a launch's is its timeout plus the
grace to stop it). The core runs in a daemon thread; when the bound passes, the call is answered with an error
observation (``timed_out``) and abandoned: a Python thread cannot be killed, so what it was doing may still finish —
the answer says so. The bound is a backstop for what should never happen (a read that waits forever, a stuck
lock): the tools bound their own children (probe and git timeouts) well inside it.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import threading
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


# The longest a tool call may take unless the tool says otherwise: above a chain of probes (300 s each) that one
# check runs, far below a run's wall budget.
TOOL_CALL_SECONDS = 1200.0


def call_bounded(name: str, fn: Callable[[], ToolResult], seconds: float) -> ToolResult:
    """``fn()`` with a wall-clock bound: its result, its exception re-raised here, or a ``timed_out`` failure."""
    box: dict[str, Any] = {}
    context = contextvars.copy_context()  # the caller's run config (LangGraph reads it from context variables)

    def target() -> None:
        try:
            box["result"] = context.run(fn)
        except BaseException as exc:  # handed to the caller's thread, which decides (re-raised there)
            box["error"] = exc

    worker = threading.Thread(target=target, name=f"tool-{name}", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        return ToolResult.failure(
            f"tool {name} did not finish within {seconds:.0f}s; the call was abandoned and its result is not "
            f"used. It may still complete in the background: check the state it touches before calling it again",
            timed_out=True, bound_s=seconds)
    if "error" in box:
        raise box["error"]
    return box["result"]


def make_tool(name: str, description: str, args_schema: type[BaseModel], core: Callable[..., ToolResult], *,
              timeout_s: float | Callable[[dict[str, Any]], float] = TOOL_CALL_SECONDS):
    """Wrap a core function as a LangChain ``StructuredTool`` whose output is the result's JSON.

    ``timeout_s``: the call's wall-clock bound in seconds, or a function of the call's arguments giving it.
    The import is local so that tool cores (and their tests) never need langchain.
    """
    from langchain_core.tools import StructuredTool

    def _run(**kwargs: Any) -> str:
        try:
            bound = float(timeout_s(kwargs) if callable(timeout_s) else timeout_s)
            return call_bounded(name, lambda: core(**kwargs), bound).to_json()
        except Exception as exc:  # boundary: the tool call (see module docstring)
            from langgraph.errors import GraphBubbleUp

            if isinstance(exc, GraphBubbleUp):  # an interrupt (approval) is control flow, not a failure
                raise
            return exception_result(name, exc).to_json()

    return StructuredTool.from_function(func=_run, name=name, description=description, args_schema=args_schema)
