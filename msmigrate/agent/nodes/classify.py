"""Failure signature → failure catalog → owner phase (+ diagnosis and optional auto-fix); LLM fallback when the
catalog has nothing close. Routes back to the owner phase, or ends the run when that phase's attempts are spent."""

from __future__ import annotations

from typing import Any

from msmigrate.agent.deps import RunDeps
from msmigrate.agent.policies.base import PolicyView
from msmigrate.agent.state import EXIT_GATE_FAILED, gates_before
from msmigrate.knowledge.classifier import classify

# Environment failures are fixed where the launch settings and script live.
OWNER_TO_PHASE = {"model": "model", "data": "data", "config": "config", "environment": "config"}


def last_failed_gate(state: dict[str, Any]) -> dict[str, Any]:
    for record in reversed(state.get("gate_history", [])):
        if not record.get("passed"):
            return record
    raise AssertionError("classify reached without a failed gate")


def make_classify_node(deps: RunDeps):
    def node(state: dict[str, Any]) -> dict[str, Any]:
        failed = last_failed_gate(state)
        text = failed.get("failure_text", "")
        verdict = classify(text, failed.get("finding_codes", []))
        failure: dict[str, Any] = {
            "gate": failed["gate"], "case_id": verdict.case_id, "owner": verdict.owner, "method": verdict.method,
            "diagnosis": verdict.diagnosis, "autofix": verdict.autofix, "excerpt": text[-3000:],
            "finding_codes": failed.get("finding_codes", []),
        }
        if verdict.method == "none":
            view = PolicyView(phase="classify", state=state, messages=[], tools=[], ctx=deps.ctx)
            opinion = deps.policy.classify(text, view)
            failure.update(opinion or {"owner": _gate_owner(failed["gate"]), "method": "gate-default",
                                       "diagnosis": "no catalog match; returning to the phase whose gate failed"})
        phase = OWNER_TO_PHASE.get(failure["owner"] or "", _gate_owner(failed["gate"]))
        attempts = dict(state.get("attempts", {}))
        attempts[phase] = attempts.get(phase, 0) + 1
        deps.trajectory.append("classify", **{k: v for k, v in failure.items() if k != "excerpt"}, route=phase)
        deps.emit("classify", gate=failed["gate"], owner=failure["owner"], case_id=failure["case_id"], route=phase)
        if attempts[phase] > deps.spec.budgets.phase_attempts:
            return {"attempts": attempts, "last_failure": failure, "phase": "report", "exit_status": EXIT_GATE_FAILED,
                    "exit_detail": f"{failed['gate']} still failing after {deps.spec.budgets.phase_attempts} "
                                   f"attempts of phase {phase}: {failure.get('case_id') or failure['diagnosis'][:200]}"}
        return {"attempts": attempts, "last_failure": failure, "phase": phase,
                "gates": gates_before(state.get("gates", {}), phase)}

    return node


def _gate_owner(gate: str) -> str:
    return {"G0": "config", "G1": "model", "G2": "data", "G3": "config"}.get(gate, "config")
