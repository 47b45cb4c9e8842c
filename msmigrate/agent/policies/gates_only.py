"""``msmigrate verify``: no policy at all — every phase goes straight to its gate, so G0–G6 run on whatever the
target already holds (a migration done by hand, by an earlier run, or by another tool). Nothing is edited."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

from msmigrate.agent.policies.base import Decision, PolicyView


class GatesOnlyPolicy:
    name = "none"

    def decide(self, view: PolicyView) -> Decision:
        return Decision(message=AIMessage(content="verify only: no edits; the gate decides"))

    def classify(self, failure_text: str, view: PolicyView,
                 evidence: dict[str, Any] | None = None) -> dict[str, Any] | None:
        return None
