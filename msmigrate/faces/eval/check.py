"""One scored fact of a trial (shared by the route scorers)."""

from __future__ import annotations

from dataclasses import dataclass

EVIDENCE_KEYS = ("command", "exit_code", "started", "ended")  # what every gate evidence item must carry


@dataclass
class Check:
    name: str
    passed: bool
    detail: str = ""
