"""Run-wide budgets. Exhaustion is an exit with a clear status, never an exception or a GraphRecursionError.

The wall-time budget counts the run's own time: the hours a run waited for the user (an approval answered a day
later, a run stopped and resumed, a machine that was down) are not spent by the run. That idle time is derived from
the trajectory (``idle_seconds``), which every drive and every pause writes to, so it survives any exit."""

from __future__ import annotations

import time
from typing import Any, Iterable

from msmigrate.agent.config import Budgets


def own_seconds(state: dict[str, Any], idle_s: float = 0.0) -> float | None:
    """Seconds the run itself has been running since it started (None before it started)."""
    started = state.get("started_at")
    return None if not started else time.time() - started - idle_s


def exhausted(state: dict[str, Any], budgets: Budgets, idle_s: float = 0.0) -> str | None:
    c = state.get("counters", {})
    if c.get("policy_steps", 0) >= budgets.policy_steps:
        return f"policy steps budget ({budgets.policy_steps}) used up"
    if c.get("tokens", 0) > budgets.tokens:
        return f"token budget ({budgets.tokens}) used up"
    if c.get("launches", 0) > budgets.launches:
        return f"launch budget ({budgets.launches}) used up"
    own = own_seconds(state, idle_s)
    if own is not None and own > budgets.wall_seconds:
        return f"wall-time budget ({budgets.wall_seconds:.0f}s) used up"
    return None


def idle_seconds(records: Iterable[dict[str, Any]]) -> float:
    """Time the run was not running, from its trajectory: the gap before each resumed drive (from the record the
    previous drive wrote last: its pause, its stop, or whatever it did before it died), plus the waits for an
    answer inside a drive (``approval_wait``: the chat or a terminal prompt asking while the run holds)."""
    idle, last = 0.0, None
    for rec in records:
        t = rec.get("t")
        if rec.get("kind") == "drive" and rec.get("resumed") and last is not None and t is not None:
            idle += max(0.0, t - last)
        elif rec.get("kind") == "approval_wait":
            idle += float(rec.get("seconds") or 0.0)
        last = t if t is not None else last
    return idle


def bump(counters: dict[str, float] | None, **inc: float) -> dict[str, float]:
    out = dict(counters or {})
    for k, v in inc.items():
        out[k] = out.get(k, 0) + v
    return out
