"""The one typed state of a migration run. Everything a node needs lives here (and is checkpointed)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages

Phase = Literal["prepare", "plan", "model", "data", "config", "verify", "classify", "report", "done"]
WORK_PHASES = ("model", "data", "config")
# Which gates each phase must pass before the run moves on.
PHASE_GATES = {"prepare": ("G0",), "model": ("G1",), "data": ("G2",), "config": ("G3",), "verify": ("G4", "G5", "G6")}
GATED_PHASES = ("model", "data", "config", "verify")  # the order gates must pass in


def next_phase(gates: dict) -> str:
    """The earliest phase with a gate that has not passed (so a repair never skips an unproven phase); report
    when every gate has passed."""
    for phase in GATED_PHASES:
        if any(not gates.get(g, {}).get("passed") for g in PHASE_GATES[phase]):
            return phase
    return "report"


def gates_before(gates: dict, phase: str) -> dict:
    """Keep only the gate records of phases before ``phase``: re-entering a phase invalidates its proof and every
    later one (an edit to data can break config or training); the history keeps the old records."""
    keep = {g for p in GATED_PHASES[: GATED_PHASES.index(phase)] for g in PHASE_GATES[p]} | {"G0"}
    return {g: r for g, r in gates.items() if g in keep}

# exit_status values (every exit ends with one, mini-swe-agent style)
EXIT_OK = "success"
EXIT_GATE_FAILED = "gates_failed"  # attempts for the owner phase exhausted
EXIT_BUDGET = "budget_exhausted"  # steps / wall time / tokens / launches
EXIT_PRECHECK = "precheck_failed"
EXIT_ERROR = "error"  # a bug or an infrastructure outage
EXIT_REJECTED = "rejected_by_user"
# Not a graph exit: what a headless face reports when the run paused before the launches for an approval nobody
# could give (the checkpoint holds the question; ``msmigrate run --resume ID --approve`` answers it).
EXIT_AWAITING_APPROVAL = "awaiting_approval"
# Not a graph exit either: the face asked the loop to stop (chat's Ctrl-C); the run resumes at that step boundary.
EXIT_STOPPED = "stopped_by_user"
EXIT_UNSUPPORTED = "unsupported_by_policy"  # the policy cannot do a phase (e.g. rules on custom code): stop at once
# Every gate this machine can run passed, and the next one needs an accelerator it does not have (the Megatron
# route's training gates): not a success, not a failure of the migration — the report lists what is unproven.
EXIT_NEEDS_ACCELERATOR = "needs_accelerator"


class GateRecord(TypedDict, total=False):
    gate: str
    passed: bool
    summary: str
    evidence: list[dict[str, Any]]  # command, exit_code, started, ended, log_excerpt, metrics
    failure_text: str  # what classify reads when the gate fails
    finding_codes: list[str]
    needs_accelerator: str  # set (what could not be proven, and why) by a gate that cannot run on this machine
    # G2 after its data check failed: the YAML's data settings against the derived ones, and whether the check passes
    # with them as derived (routes/fsdp2/gates/data_settings.py); the classify node reads it
    data_settings: dict[str, Any]


class MigrationState(TypedDict, total=False):
    run_id: str
    phase: Phase
    source_summary: dict[str, Any]
    target_summary: dict[str, Any]
    plan: dict[str, Any]
    messages: Annotated[list[AnyMessage], add_messages]  # the current phase's policy conversation
    attempts: dict[str, int]  # gate failures per phase
    gates: dict[str, GateRecord]  # latest record per gate
    gate_history: list[GateRecord]
    artifacts: dict[str, str]
    counters: dict[str, float]  # policy_steps, tool_calls, tokens, launches, format_errors
    last_failure: dict[str, Any] | None  # classify's verdict: case_id, owner, diagnosis, autofix, excerpt
    runtime: dict[str, Any]  # what the env probe found in the target runtime
    instructions: str  # free text from the user (spec or chat)
    launch_edits: dict[str, Any]  # launch settings the user edited at an approval (survive a resume)
    max_attempts: int  # budgets.phase_attempts, shown to the policy
    started_at: float
    handoff: list[dict[str, Any]]  # one record per passed phase (agent/handoff.py), rendered atop the next prompt
    finish_request: dict[str, Any] | None  # the policy's finish_phase arguments until the phase gate has run
    exit_status: str | None
    exit_detail: str
    code_approval: dict[str, Any]  # approval on: {"pending": phase} while G1 waits, {"approved": head} after
