"""Replays the decisions of a recorded ``trajectory.jsonl`` (regression tests of the graph without an LLM).

The n-th decision of this run is the n-th recorded ``decision`` record; the index is the run's own
``policy_steps`` counter, which is checkpointed, so a resumed replay continues where it stopped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage

from msmigrate.agent.policies.base import Decision, PolicyError, PolicyView
from msmigrate.agent.trajectory import Trajectory


class ReplayPolicy:
    name = "replay"

    def __init__(self, trajectory_path: Path):
        self.decisions = Trajectory(Path(trajectory_path)).records("decision")
        if not self.decisions:
            raise PolicyError(f"no decisions recorded in {trajectory_path}")

    def decide(self, view: PolicyView) -> Decision:
        index = int(view.state.get("counters", {}).get("policy_steps", 0))
        if index >= len(self.decisions):
            raise PolicyError(f"replay exhausted after {len(self.decisions)} decisions (phase {view.phase})")
        rec = self.decisions[index]
        if rec["phase"] != view.phase:
            raise PolicyError(f"replay diverged at decision {index}: recorded phase {rec['phase']}, now {view.phase}")
        calls = [{**c, "type": "tool_call"} for c in rec.get("tool_calls", [])]
        return Decision(message=AIMessage(content=rec.get("content", ""), tool_calls=calls), tokens=0)

    def classify(self, failure_text: str, view: PolicyView,
                 evidence: dict[str, Any] | None = None) -> dict[str, Any] | None:
        return None
