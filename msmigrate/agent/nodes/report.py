"""Last node: decides the exit status if nothing set it, and writes the run's artifacts."""

from __future__ import annotations

from typing import Any

from msmigrate.agent.deps import RunDeps
from msmigrate.agent.report import write_artifacts
from msmigrate.agent.state import EXIT_GATE_FAILED, EXIT_OK, PHASE_GATES

ALL_GATES = [g for gates in PHASE_GATES.values() for g in gates]


def make_report_node(deps: RunDeps):
    def node(state: dict[str, Any]) -> dict[str, Any]:
        status = state.get("exit_status")
        detail = state.get("exit_detail", "")
        gates = state.get("gates", {})
        if not status:
            missing = [g for g in ALL_GATES if not gates.get(g, {}).get("passed")]
            status = EXIT_OK if not missing else EXIT_GATE_FAILED
            detail = detail or ("all gates passed with evidence" if not missing else f"not passed: {', '.join(missing)}")
        artifacts = write_artifacts(deps, {**state, "exit_status": status, "exit_detail": detail})
        deps.trajectory.append("exit", exit_status=status, detail=detail)
        deps.emit("exit", exit_status=status, detail=detail, report=artifacts.get("report"))
        return {"exit_status": status, "exit_detail": detail, "artifacts": artifacts, "phase": "done"}

    return node
