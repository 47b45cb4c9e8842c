"""G4 functional → G5 reliability → G6 distributed end-to-end. These gates launch training, so with approval on
the node first asks the human (LangGraph ``interrupt``): approve, reject, or edit the launch settings."""

from __future__ import annotations

from typing import Any

from langgraph.types import interrupt

from msmigrate.agent.budgets import exhausted
from msmigrate.agent.deps import RunDeps
from msmigrate.agent.nodes.work import proved_here, run_gates
from msmigrate.agent.state import EXIT_BUDGET, EXIT_REJECTED, PHASE_GATES
from msmigrate.tools.file_writer import target_commit

EDITABLE_LAUNCH_KEYS = {"nproc_per_node", "device", "gate_train_iters", "parity_steps", "timeout_s", "master_addr",
                        "nnodes", "node_rank", "backend",
                        *(f"slurm.{k}" for k in ("partition", "account", "qos", "gres", "time", "cpus_per_task", "mem",
                                                 "constraint", "exclusive"))}


def apply_launch_edits(deps: RunDeps, edits: dict[str, Any]) -> None:
    """Raises ValueError when the edited settings are not valid launch settings."""
    deps.spec.launch = deps.spec.launch.with_edits(edits)


def make_verify_node(deps: RunDeps):
    def node(state: dict[str, Any]) -> dict[str, Any]:
        reason = exhausted(state, deps.spec.budgets, deps.idle_s)
        if reason:
            return {"phase": "report", "exit_status": EXIT_BUDGET, "exit_detail": f"{reason} (before verify)"}
        shown = deps.spec.launch.model_dump(exclude={"slurm"} if deps.spec.launch.backend == "local" else None)
        commit = target_commit(deps.ctx)  # after a stop between the gates, those already proved are not relaunched
        to_launch = [g for g in PHASE_GATES["verify"] if not proved_here(state.get("gates") or {}, g, commit)]
        payload = {"kind": "launch", "gates": to_launch, "launch": shown}
        while deps.spec.approval:
            answer = interrupt(payload)
            verdict = answer.get("action", "approve") if isinstance(answer, dict) else str(answer)
            deps.trajectory.append("approval", what="launch", answer=answer)
            if verdict == "reject":
                return {"phase": "report", "exit_status": EXIT_REJECTED, "exit_detail": "launch rejected by the user"}
            if verdict != "edit":
                break
            edits = {k: v for k, v in answer.get("launch", {}).items() if k in EDITABLE_LAUNCH_KEYS}
            try:  # validated like the spec: a refused value asks again instead of reaching a launch
                apply_launch_edits(deps, edits)
            except ValueError as exc:
                payload = {**payload, "error": f"edit refused: {exc}"}
                continue
            # launched with other settings, G4–G6 records of an earlier visit (a stop between them) prove nothing
            # about this launch: dropped, so every verify gate runs again
            dropped = [g for g in PHASE_GATES["verify"] if g in (state.get("gates") or {})]
            if dropped:
                deps.trajectory.append("gates_invalidated", why="launch settings edited at the approval",
                                       gates={g: "launched with other settings" for g in dropped})
            state = {**state, "gates": {g: r for g, r in (state.get("gates") or {}).items() if g not in dropped}}
            # kept in the state (checkpointed), so a resumed run in a new process launches with the edit too
            return {**run_gates(deps, state, "verify"), "launch_edits": {**state.get("launch_edits", {}), **edits}}
        return run_gates(deps, state, "verify")

    return node
