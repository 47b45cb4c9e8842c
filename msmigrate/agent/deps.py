"""The run's wiring handed to every node: context, spec, policy, tools, gates, trajectory.

Only references to collaborators — no behaviour lives here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from langchain_core.tools import BaseTool

from msmigrate.agent.config import RunSpec
from msmigrate.agent.policies.base import Policy
from msmigrate.agent.state import GateRecord
from msmigrate.agent.trajectory import Trajectory
from msmigrate.core.run_context import RunContext

GateFn = Callable[["RunDeps", dict[str, Any]], GateRecord]


@dataclass
class RunDeps:
    ctx: RunContext
    spec: RunSpec
    policy: Policy
    tools: list[BaseTool]
    gates: dict[str, GateFn]  # "G0".."G6"
    trajectory: Trajectory
    on_event: Callable[[str, dict[str, Any]], None] = field(default=lambda kind, data: None)
    worktree_error: str | None = None  # why the run has no work tree of its own (G0 fails with it)
    # the face's stop request (chat's Ctrl-C), set by ``Run.drive``: read between the verify phase's gates, so a
    # stop during G4 launches nothing more, and by a Slurm launch (cancelled after a grace period)
    stop_requested: Callable[[], bool] = field(default=lambda: False)
    idle_s: float = 0.0  # seconds the run waited for the user or was not running (budgets.idle_seconds)

    def emit(self, kind: str, **data: Any) -> None:
        """Progress for the faces (chat streams it, batch shows it) and the trajectory."""
        self.on_event(kind, data)
