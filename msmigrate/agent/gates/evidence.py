"""One evidence item: what ran, how it ended, when, what it printed, what was measured. Gates pass only with these."""

from __future__ import annotations

import time
from typing import Any


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) + f".{int((t % 1) * 1000):03d}"


def evidence_item(label: str, command: list[str] | str, exit_code: int | None, started: float, ended: float,
                  log_excerpt: str, metrics: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "label": label, "command": command, "exit_code": exit_code, "started": _iso(started), "ended": _iso(ended),
        "seconds": round(ended - started, 2), "log_excerpt": log_excerpt[-3000:], "metrics": metrics or {}, **extra,
    }


def probe_runtime(res: Any) -> dict[str, Any]:
    """How a probe ran: ``runtime_mode`` warm (forked from the warm runtime) or cold (fresh process, with the reason)."""
    data = getattr(res, "data", None) or {}
    return {k: data[k] for k in ("runtime_mode", "runtime_reason") if k in data}
