"""Run-wide budgets. Exhaustion is an exit with a clear status, never an exception or a GraphRecursionError."""

from __future__ import annotations

import time
from typing import Any

from msmigrate.agent.config import Budgets


def exhausted(state: dict[str, Any], budgets: Budgets) -> str | None:
    c = state.get("counters", {})
    if c.get("policy_steps", 0) >= budgets.policy_steps:
        return f"policy steps budget ({budgets.policy_steps}) used up"
    if c.get("tokens", 0) > budgets.tokens:
        return f"token budget ({budgets.tokens}) used up"
    if c.get("launches", 0) > budgets.launches:
        return f"launch budget ({budgets.launches}) used up"
    started = state.get("started_at")
    if started and time.time() - started > budgets.wall_seconds:
        return f"wall-time budget ({budgets.wall_seconds:.0f}s) used up"
    return None


def bump(counters: dict[str, float] | None, **inc: float) -> dict[str, float]:
    out = dict(counters or {})
    for k, v in inc.items():
        out[k] = out.get(k, 0) + v
    return out
