"""The loop every work phase (model, data, config) runs, one policy decision per node visit:

policy proposes tool calls → the tools node runs them → back here → … → the policy proposes nothing (it thinks the
phase is done) → the phase gate (code) decides: pass → next phase; fail → classify (which routes to the owner phase)."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import interrupt

from msmigrate.agent.budgets import bump, exhausted
from msmigrate.agent.deps import RunDeps
from msmigrate.agent.handoff import handoff_record, new_ids, plan_revision
from msmigrate.agent.policies.base import PolicyView
from msmigrate.agent.state import (EXIT_BUDGET, EXIT_ERROR, EXIT_GATE_FAILED, EXIT_NEEDS_ACCELERATOR,
                                   EXIT_REJECTED, EXIT_UNSUPPORTED, GATED_PHASES, PHASE_GATES, next_phase)
from msmigrate.agent.writer_recovery import settle_worktree
from msmigrate.tools.file_writer import changed_since, tag_phase, target_commit
from msmigrate.tools.launcher.records import read_launches
from msmigrate.tools.repo_reader import target_inventory

DECISION_NOTES = ("requests", "prompt_chars", "tool_schema_chars", "prompt_tokens")  # LLM size figures, recorded
SAME_TARGET_FAILURES = 2  # a gate that failed this often on one target commit is not run on it again


def clear_messages() -> list[RemoveMessage]:
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES)]


# gate -> the target paths (from the plan) whose content it proved: an edit there after it passed makes its proof
# stale. G1 proved the model plugin; the later gates are re-run anyway when their phase is re-entered.
PROVED_PATHS = {"G1": lambda plan: [plan["plugin_dir"]] if plan.get("plugin_dir") else []}


def stale_proofs(deps: RunDeps, state: dict[str, Any], phase: str) -> list[tuple[str, list[str]]]:
    """Gates of earlier phases that passed on files a later phase has edited since (a data-phase repair that
    changes the model plugin's init, say): they run again, first, before this phase's gates count."""
    gates, plan = state.get("gates", {}), state.get("plan") or {}
    earlier = GATED_PHASES[:GATED_PHASES.index(phase)] if phase in GATED_PHASES else ()
    stale = []
    for gate in (g for p in earlier for g in PHASE_GATES[p] if g in PROVED_PATHS):
        record, paths = gates.get(gate) or {}, PROVED_PATHS[gate](plan)
        if not record.get("passed") or not paths or not record.get("target_commit"):
            continue  # (no commit recorded: a target without git history, nothing to compare)
        changed = changed_since(deps.ctx, record["target_commit"], paths)
        if changed:  # (None: git does not know that commit — never one of the run's own edits — nothing compared)
            stale.append((gate, changed))
    return stale


def nothing_to_redo(deps: RunDeps, state: dict[str, Any], phase: str) -> list[str] | None:
    """This phase's delivered files when the phase is entered again with nothing of its own to redo: a fresh visit
    (no conversation), no failure pending (an earlier phase's repair just passed), the phase passed before (its
    hand-off), and none of the files it wrote changed since its gate last passed on them. None otherwise."""
    if state.get("messages") or state.get("last_failure") or phase not in GATED_PHASES:
        return None
    record = next((h for h in state.get("handoff") or [] if h.get("phase") == phase), None)
    commit = proved_commit(state.get("gate_history") or [], phase)
    if record is None or commit is None or not record.get("files_written"):
        return None
    changed = changed_since(deps.ctx, commit, list(record["files_written"]))
    return list(record["files_written"]) if changed == [] else None


def proved_commit(history: list[dict[str, Any]], phase: str) -> str | None:
    """The target commit this phase's files were last proved at: its own gate's last pass, or a later phase's gate
    that passed after it. A later phase may edit a file this one wrote (the config phase finishing the YAML the data
    phase drafted) and its own gate proves that edit: such a change is no work left to this phase (live run 7 asked
    the data phase twice to re-check a YAML only the config phase had touched). None when the phase never passed."""
    own = PHASE_GATES[phase][-1]
    later = {g for p in GATED_PHASES[GATED_PHASES.index(phase):] for g in PHASE_GATES[p]}
    start = next((i for i in range(len(history) - 1, -1, -1)
                  if history[i].get("gate") == own and history[i].get("passed") and history[i].get("target_commit")),
                 None)
    if start is None:
        return None
    after = [r for r in history[start:] if r.get("gate") in later and r.get("passed") and r.get("target_commit")]
    return after[-1]["target_commit"]


def proved_here(gates: dict[str, Any], name: str, commit: str | None) -> bool:
    """The gate's current record passed on ``commit`` (the only way a phase's gate record survives into a new
    visit of that phase is a stop between its gates: re-entering a phase drops its records)."""
    record = gates.get(name) or {}
    return bool(commit) and bool(record.get("passed")) and record.get("target_commit") == commit


def run_gates(deps: RunDeps, state: dict[str, Any], phase: str) -> dict[str, Any]:
    """Run the phase's gates in order, after any earlier gate whose proof this phase's edits made stale; stop at
    the first failure. Returns the state update."""
    # the user's answer, restored for every node that runs gates (verify re-running a stale G1 after a resume in a
    # new process used to run it as unapproved, record the refusal as a G1 failure and send it to the model phase)
    deps.ctx.code_approved = bool((state.get("code_approval") or {}).get("approved"))
    gates = dict(state.get("gates", {}))
    history = list(state.get("gate_history", []))
    counters = dict(state.get("counters", {}))
    # a gate proves a commit: whatever is on disk but not in git is committed first (or the gate is not run)
    unfit = settle_worktree(deps.ctx, deps.trajectory, f"before the {phase} gates", state.get("plan"))
    if unfit:
        return {"phase": "report", "exit_status": EXIT_ERROR, "messages": clear_messages(),
                "exit_detail": f"{'/'.join(PHASE_GATES[phase])} not run: {unfit}"}
    commit = target_commit(deps.ctx)
    stale = stale_proofs(deps, state, phase)
    for gate, changed in stale:
        deps.trajectory.append("gate_rerun", phase=phase, gate=gate, changed=changed[:20],
                               why=f"{gate} passed before files it proved changed; it runs again before "
                                   f"{'/'.join(PHASE_GATES[phase])}")
    for name in [g for g, _ in stale] + list(PHASE_GATES[phase]):
        if name in PHASE_GATES[phase] and proved_here(gates, name, commit):
            # passed on this very commit before a stop between this phase's gates: the resume goes on after it
            deps.trajectory.append("gate_kept", phase=phase, gate=name, target_commit=commit)
            continue
        if phase == "verify" and deps.stop_requested():
            # each verify gate launches training: after a stop nothing more is launched; the run resumes here
            deps.trajectory.append("gates_stopped", phase=phase, before=name, by="user")
            deps.emit("gates_stopped", phase=phase, before=name)
            return {"gates": gates, "gate_history": history, "counters": counters, "phase": phase}
        # a failure of the host (a port collision the launcher's retry could not get past) is no verdict on it
        same = [r for r in history if r.get("gate") == name and commit and r.get("target_commit") == commit
                and not r.get("infrastructure") and not r.get("stopped_by_user")]
        if len(same) >= SAME_TARGET_FAILURES and not any(r.get("passed") for r in same):
            detail = (f"{name} failed {len(same)} times on the identical target (commit {commit[:12]}) and nothing "
                      f"was changed since; not run again: {same[-1].get('summary', '')[:300]}")
            deps.trajectory.append("gate_skipped", phase=phase, gate=name, target_commit=commit, detail=detail)
            return {"gates": gates, "gate_history": history, "counters": counters, "phase": "report",
                    "exit_status": EXIT_GATE_FAILED, "exit_detail": detail, "messages": clear_messages()}
        deps.emit("gate_start", gate=name, phase=phase)
        record = {**deps.gates[name](deps, {**state, "gates": gates}), "target_commit": commit}
        counters = bump(counters, launches=record.get("launches", 0))
        # The journal is the truth: launches finished before a kill -9 are reused (not counted again) by the
        # resumed node, whose first visit never saved its count; every started attempt is in launches.jsonl.
        counters["launches"] = max(counters.get("launches", 0), len(read_launches(deps.ctx.run_dir)))
        if phase == "verify" and not record["passed"] and deps.stop_requested():
            # the user's stop ended its launch (a Slurm job cancelled after the grace period): no verdict on the
            # code, nothing to classify; the history keeps it and the resumed run launches this gate again
            history.append({**record, "stopped_by_user": True})
            deps.trajectory.append("gates_stopped", phase=phase, during=name, by="user")
            return {"gate_history": history, "counters": counters, "gates": gates, "phase": phase}
        gates[name] = record
        history.append(record)
        deps.trajectory.append("gate", phase=phase, **record)
        deps.emit("gate_end", gate=name, phase=phase, passed=record["passed"], summary=record.get("summary", ""))
        if not record["passed"] and record.get("needs_accelerator"):
            # nothing to repair: the gate cannot run here (no classify, no retry); the report says what is unproven
            return {"gates": gates, "gate_history": history, "counters": counters, "phase": "report",
                    "exit_status": EXIT_NEEDS_ACCELERATOR, "messages": clear_messages(),
                    "exit_detail": f"{name} needs an accelerator: " + (
                        record["needs_accelerator"] if isinstance(record["needs_accelerator"], str)
                        else record.get("summary", ""))}
        if not record["passed"]:
            return {"gates": gates, "gate_history": history, "counters": counters, "phase": "classify",
                    "messages": clear_messages(), "finish_request": None}
    tag_phase(deps.ctx, phase)  # rollback point: the state of the target when this phase's gates passed
    return {"gates": gates, "gate_history": history, "counters": counters, "phase": next_phase(gates),
            "messages": clear_messages(), "last_failure": None, "finish_request": None,
            **handoff_update(deps, state, phase, gates)}


def handoff_update(deps: RunDeps, state: dict[str, Any], phase: str, gates: dict[str, Any]) -> dict[str, Any]:
    """The hand-off record of a passed phase, and the target inventory re-read after its gate (the next prompt
    must list the ids this phase registered, not the ones prepare saw)."""
    before = state.get("target_summary") or {}
    inv = target_inventory(deps.ctx.target)
    after = {**inv.data, "similar_cases": before.get("similar_cases", [])} if inv.ok else before
    record = handoff_record(phase, gates, list(state.get("messages", [])), state.get("finish_request"),
                            new_ids(before, after))
    earlier = next((h for h in state.get("handoff") or [] if h.get("phase") == phase), None)
    if earlier is not None and not state.get("messages") and not state.get("finish_request"):
        # re-proved without a conversation (nothing_to_redo): what the phase delivered is still the earlier record's
        record = {**earlier, "gates_proved": record["gates_proved"]}
    deps.trajectory.append("handoff", **record)
    kept = [h for h in state.get("handoff") or [] if h.get("phase") != phase]
    update = {"handoff": [*kept, record], "target_summary": json_safe(after)}
    revised = plan_revision(state.get("plan") or {}, record, deps.ctx.model_name)
    if revised is not None:  # delivered differs from planned: the plan says what was delivered, and keeps why
        deps.trajectory.append("plan_revised", revisions=revised["revisions"])
        update["plan"] = revised
    return update


def json_safe(obj: Any) -> Any:
    """Plain dict/list/str/number copies (the checkpointer serialises the state)."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj if obj is None or isinstance(obj, (str, int, float, bool)) else str(obj)


def code_approval_needed(deps: RunDeps, state: dict[str, Any]) -> bool:
    """With approval on, the first gate that would execute model-written code (G1, or G2/G3 when a resumed run
    starts later) waits for the user; the answer covers the run's later code-executing gates and check tools."""
    return bool(deps.spec.approval) and not (state.get("code_approval") or {}).get("approved")


def ask_code_approval(deps: RunDeps, state: dict[str, Any], phase: str) -> dict[str, Any]:
    """Interrupt for the approval; returns the state update (approved, or rejected → report)."""
    payload = {"kind": "code_execution", "phase": phase, "gates": list(PHASE_GATES[phase]),
               "what": "run the code written in this run (plugin, data and config) in the target runtime: a "
                       "subprocess with the scrubbed environment, a timeout and its own process group",
               "work_branch": deps.ctx.work_branch, "worktree": str(deps.ctx.target)}
    answer = interrupt(payload)
    verdict = answer.get("action", "approve") if isinstance(answer, dict) else str(answer)
    deps.trajectory.append("approval", what="code_execution", answer=answer)
    if verdict == "reject":
        return {"phase": "report", "exit_status": EXIT_REJECTED,
                "exit_detail": "executing the model-written code was rejected by the user",
                "code_approval": {"rejected": True}}
    deps.ctx.code_approved = True
    return {"code_approval": {"approved": True, "phase": phase}}


# the plan keys each phase decides, and may decide again on a repair visit (``Decision.plan_update``)
PHASE_PLAN_KEYS = {"data": ("data_branch", "data_branch_why", "template", "mm_plugin", "collator", "collator_drops")}


def replanned(plan: dict[str, Any], phase: str, update: dict[str, Any] | None, why: str) -> dict[str, Any] | None:
    """The plan with the phase's own decisions re-decided by its policy, the change recorded in ``revisions`` (the
    report and the eval read the final plan); None when nothing of this phase's changes. A key another phase owns
    is never taken from a policy's update."""
    own = {k: v for k, v in (update or {}).items() if k in PHASE_PLAN_KEYS.get(phase, ()) and plan.get(k) != v}
    if not own:
        return None
    changed = ", ".join(f"{k} {plan.get(k)!r} → {v!r}" for k, v in own.items() if k != "data_branch_why")
    revision = {"phase": phase, "field": "decision", "why": f"{changed}: {why}"[:300]}
    return {**plan, **own, "revisions": [*(plan.get("revisions") or []), revision]}


def make_work_node(deps: RunDeps, phase: str):
    def node(state: dict[str, Any]) -> dict[str, Any]:
        deps.ctx.code_approved = bool((state.get("code_approval") or {}).get("approved"))
        if (state.get("code_approval") or {}).get("pending") == phase:  # the policy finished: G1.. wait for a human
            update = ask_code_approval(deps, state, phase)
            if update.get("exit_status"):
                return update
            return {**run_gates(deps, {**state, **update}, phase), **update}
        reason = exhausted(state, deps.spec.budgets, deps.idle_s)
        if reason:
            return {"phase": "report", "exit_status": EXIT_BUDGET, "exit_detail": f"{reason} (in phase {phase})"}
        if state.get("finish_request"):  # the policy called finish_phase: the gate decides, no new decision
            if code_approval_needed(deps, state):
                return {"phase": phase, "code_approval": {"pending": phase}}
            return run_gates(deps, state, phase)
        unchanged = nothing_to_redo(deps, state, phase)
        if unchanged is not None:
            # re-entered after an earlier phase's repair, with this phase's delivered files as its gate passed on
            # them: the gate re-proves them on the repaired target without asking the policy (an LLM request that
            # could only say "unchanged, run the gate"; a failing gate brings the policy in with its evidence)
            deps.trajectory.append("gate_direct", phase=phase, files_unchanged=unchanged[:20])
            deps.emit("decision", phase=phase, content="delivered files unchanged since this phase's gate passed: "
                                                        "re-running its gate", tool_calls=[])
            if code_approval_needed(deps, state):
                return {"phase": phase, "code_approval": {"pending": phase}}
            return run_gates(deps, state, phase)
        view = PolicyView(phase=phase, state=state, messages=list(state.get("messages", [])), tools=deps.tools, ctx=deps.ctx)
        decision = deps.policy.decide(view)
        msg: AIMessage = decision.message
        counters = bump(state.get("counters"), policy_steps=1, tokens=decision.tokens, format_errors=decision.format_errors)
        deps.trajectory.append(
            "decision", phase=phase, policy=deps.policy.name, content=str(msg.content)[:4000],
            tool_calls=[{"name": c["name"], "args": c["args"], "id": c["id"]} for c in msg.tool_calls],
            tokens=decision.tokens, **{k: v for k, v in decision.notes.items() if k in DECISION_NOTES},
        )
        deps.emit("decision", phase=phase, content=str(msg.content)[:500], tool_calls=[c["name"] for c in msg.tool_calls])
        if decision.unsupported:
            return {"counters": counters, "phase": "report", "exit_status": EXIT_UNSUPPORTED,
                    "exit_detail": f"{deps.policy.name} policy, {phase} phase — {decision.unsupported}",
                    "messages": clear_messages()}
        revised = replanned(state.get("plan") or {}, phase, decision.plan_update, str(msg.content))
        if revised is not None:  # before this phase's gates run: they check what the phase now delivers
            deps.trajectory.append("plan_revised", revisions=revised["revisions"][-1:])
            state = {**state, "plan": revised}
        planned = {"plan": revised} if revised is not None else {}
        if msg.tool_calls:
            return {"messages": [msg], "counters": counters, "phase": phase, **planned}
        if code_approval_needed(deps, state):  # ask on the next visit, so a resume does not re-ask the policy
            return {"counters": counters, "phase": phase, "code_approval": {"pending": phase}, **planned}
        return {**planned, **run_gates(deps, {**state, "counters": counters}, phase)}

    node.__name__ = f"{phase}_node"
    return node
