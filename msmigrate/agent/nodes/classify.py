"""Failure → owner phase. The deterministic classifier (root cause → failure catalog) answers when it is sure;
when it abstains ("unknown"), the policy's LLM is asked with the extracted root cause, the closest candidate cases
and the owner semantics, and its answer and reason are recorded; without an LLM verdict the failure goes back to
the phase whose gate failed (or, when the LLM abstained naming the owners that stay possible and that phase is not
among them, to the first of them), and the recorded diagnosis says so. Routes back to the owner phase, or ends the run
when that phase's attempts are spent."""

from __future__ import annotations

import re
from typing import Any

from msmigrate.agent.budgets import bump
from msmigrate.agent.deps import RunDeps
from msmigrate.agent.policies.base import PolicyView
from msmigrate.agent.run_settings import run_settings
from msmigrate.agent.runtime_facts import runtime_facts
from msmigrate.agent.state import EXIT_GATE_FAILED, gates_before
from msmigrate.agent.failure_artifacts import config_keys, run_artifacts, run_facts_owner, where_to_fix
from msmigrate.knowledge.catalog import load_catalog
from msmigrate.knowledge.classifier import Classification, classify, load_calibration
from msmigrate.knowledge.failure_context import (ContextVerdict, context_owner, derived_settings_owner, fix_in_place_owner,
                                                 keys_named, keys_valued, run_frames, source_batch_owner, variables_valued)
from msmigrate.tools.target_checks import UNAPPROVED

# Environment failures are fixed where the launch settings and script live.
OWNER_TO_PHASE = {"model": "model", "data": "data", "config": "config", "environment": "config"}
GATE_PHASE = {"G0": "config", "G1": "model", "G2": "data", "G3": "config"}
MAX_CANDIDATES = 5
# Lexical (BM25) neighbours shown besides the message matches: on the tuning half their vote named the labelled owner
# in under half of the excerpts the patterns leave undecided (calibration.json, vote_correct of votes), barely above
# always naming the commonest owner; a blind player called the long lists noise, so only the closest two are shown
MAX_LEXICAL_SHOWN = 2
# The warnings shown when the log has no failure signal (the last ones: nearest to where the run stopped)
MAX_WARNINGS_SHOWN = 5
# Whether the LLM may override a tentative deterministic answer (a regex hit among equal rivals or read from a
# condition, a lexical vote) and not only answer abstentions. Off: measured with a blind player on the real-log
# corpus (scripts/knowledge_accuracy.py, answers in evals/real_logs/llm_stage_answers_review.json), reviewing
# changed one of the two tentative tuning answers, from right to wrong, and none of the held-out ones
# (benchmarks/RESULTS.md).
REVIEW_TENTATIVE = False
# How sure a context rule is (failure_context.py): a frame in the run's own code, the YAML loader's error, a key named
# in the error line and a host errno say whose artifact it is; the last change only says what changed before it.
CONTEXT_CONFIDENCE = {"frames": 0.8, "config-loading": 0.85, "key": 0.8, "host": 0.8, "runtime": 0.8,
                      "last-change": 0.5, "loss-graph": 0.8,
                      "plugin-import": 0.85, "registration": 0.9, "gate-remedy": 0.9, "attention-class": 0.85,
                      "attention-flag": 0.85, "fix-in-place": 0.8,
                      "source-batch": 0.8, "derived-settings": 0.8, "signature": 0.85, "runtime-env": 0.85, "runtime-decode": 0.85,
                      "broken-install": 0.85}


# How check_forward / G1's forward probe (tools/probes/forward_smoke.py, PATH_NAMES) names the meta-init path that
# left a tensor non-finite, up to the tensor: "fresh init (no load: ...): parameter `x` is not finite after ...".
META_PATH_RE = re.compile(r"(fresh init|resumed load) \([^`\n]*\): ((?:non-persistent )?(?:parameter|buffer) `[^`]+` "
                          r"is not finite [^;.\n]*)")
META_PATH_WORDS = {"fresh init": "the fresh path without training.load (meta -> to_empty -> init_weights; G4 trains "
                                 "it where the config loads no weights): init_weights did not write it",
                   "resumed load": "the resumed-load path (meta -> to_empty -> checkpoint load, init_weights skipped; "
                                   "G5's load run trains it): the checkpoint does not restore it"}


def meta_path_said(evidence: str) -> str:
    """Which of the trainer's meta-init paths left which tensor non-finite, from the gate's own evidence, for the
    front of the diagnosis: the canned case advice covers both paths and the fix differs. '' when none is named."""
    said = [f"{m.group(2)}: on {META_PATH_WORDS[m.group(1)]}" for m in META_PATH_RE.finditer(evidence)]
    return ("Seen by the forward probe: " + "; ".join(said) + ". ") if said else ""


def last_failed_gate(state: dict[str, Any]) -> dict[str, Any]:
    for record in reversed(state.get("gate_history", [])):
        if not record.get("passed"):
            return record
    raise AssertionError("classify reached without a failed gate")


def candidate_basis(cand: dict[str, Any], calibration: dict[str, Any] | None = None) -> str:
    """How the deterministic stages found a candidate and how far to trust it, in words for the LLM; a lexical
    neighbour's worth is the calibration's measured agreement of the lexical vote, when it has one."""
    if cand.get("stage") == "regex" and "tuning_hits" in cand:
        return (f"its message matched the log, but the same message was owned by this owner in only "
                f"{cand['tuning_agree']} of {cand['tuning_hits']} real failures of the tuning corpus: not decisive")
    if cand.get("stage") == "regex" and int(cand.get("priority", 50)) <= 20:
        return "its message matched the log, but it is a wrapper-level case (says a process failed, not why)"
    if cand.get("stage") == "regex" and cand.get("outside_failure_lines"):
        return ("its message matched a line that is not one of the log's failure lines (a warning or a note the "
                "run went on after), so it decided nothing")
    if cand.get("stage") == "regex":
        return "its message matched the log"
    if cand.get("stage") == "bm25":
        said = f"worded like the log (BM25 score {cand.get('score', 0)}), no message match"
        votes, correct = (calibration or {}).get("votes"), (calibration or {}).get("vote_correct")
        if votes and correct is not None:
            said += (f"; a weak hint: on the tuning corpus, such wording named the right owner in {correct} of "
                     f"{votes} failures no message decided")
        return said
    return "closest by wording"


def deterministic_view(verdict: Classification) -> dict[str, Any]:
    """The deterministic stages' own answer for the prompt: what they said, how sure, and whether it stands."""
    if verdict.method == "none":
        lexical = verdict.vote
        said = "unknown (no case it trusts)"
        if lexical:
            accepted = lexical.get("accepted_from")
            said += (f"; the lexical vote leaned to {lexical['owner']} with margin {lexical['margin']}, below what "
                     f"its calibration accepts ({accepted if accepted is not None else 'no margin is accepted'})")
        return {"answer": said, "tentative": False}
    answer = f"{verdict.case_id or 'no single case'} (owner {verdict.owner}, {verdict.method}, confidence " \
             f"{verdict.confidence})"
    return {"answer": answer, "tentative": verdict.tentative}


def llm_evidence(gate: str, verdict: Classification, settings: list[dict[str, str]] | None = None,
                 runtime: list[str] | None = None, context: list[str] | None = None) -> dict[str, Any]:
    """What the LLM is shown besides the excerpt: the root cause, the deterministic stages' answer with its
    confidence, the closest cases with their owners and how each was found, and (inside a run) the run's own
    settings files (agent/run_settings.py), which hold the fact that decides config more often than the log does,
    and the target runtime the run probed (agent/runtime_facts.py): versions and devices, which decide environment."""
    primary = verdict.root_cause.get("primary") or {}
    catalog = load_catalog()
    calibration = load_calibration()
    candidates, lexical = [], 0
    for cand in verdict.candidates:
        entry = catalog.get(cand.get("case_id", ""))
        if entry is None or entry.id in {c["case_id"] for c in candidates}:
            continue
        if cand.get("stage") == "bm25":
            if lexical == MAX_LEXICAL_SHOWN:
                continue
            lexical += 1
        candidates.append({"case_id": entry.id, "owner": entry.meta["owner"], "title": entry.title,
                           "cause": entry.meta["cause"], "basis": candidate_basis(cand, calibration)})
    root = {"kind": primary.get("kind", "none"), "text": primary.get("text", ""),
            "evidence": verdict.root_cause.get("evidence", ""),
            # whose code the traceback passes through: decides "whose code raises or lacks the thing"
            "code_path": verdict.root_cause.get("code_path", ""),
            # what the installed libraries said of the message (knowledge/library_facts.py), e.g. a model type
            "facts": verdict.root_cause.get("facts") or [],
            # the launch command the log shows (its arguments are settings), when the excerpt has one
            "command": verdict.root_cause.get("command", "")} if primary else \
        {"kind": "none", "text": "none found: " + _why_no_root_cause(verdict.root_cause), "evidence": "",
         # a failed run whose log holds only warnings: they are all there is to read (never decisive alone)
         "warnings": list(dict.fromkeys(verdict.root_cause.get("warnings") or []))[-MAX_WARNINGS_SHOWN:]}
    if primary.get("kind") == "traceback":  # the output was cut inside a traceback: its error line is missing
        root["text"] += (" (the excerpt ends inside this traceback before its exception line: the error itself is "
                         "not shown; the full log or the failed gate's log tail would decide)")
    if verdict.root_cause.get("cut_later") and primary.get("kind") != "traceback":
        # a later traceback (another process, or this one re-raised) lost its exception line: say so
        root["text"] += (" (a later traceback in the excerpt ends before its exception line, last frame: "
                         f"{verdict.root_cause['cut_later'][:200]}; what it raised is not shown: another process's own "
                         "failure, or this one re-raised)")
    if primary.get("wrapper"):  # only a launcher / re-raise summary: say that the rank's own error is missing
        root["text"] += (" (a wrapper: it says a process failed, not why; the failing rank's own error is not in "
                         "the excerpt)")
    evidence = {"gate": gate, "root_cause": root, "candidates": candidates[:MAX_CANDIDATES],
                "deterministic": deterministic_view(verdict)}
    if settings:  # only when there are files: a corpus excerpt's evidence (and its recorded answers' key) is unchanged
        evidence["settings"] = settings
    if runtime:  # likewise only inside a run that probed its runtime
        evidence["runtime"] = runtime
    if context:  # the run's own context: frames in its artifacts, keys of its YAML, what decides (failure_context)
        evidence["run_context"] = context
    return evidence


def _why_no_root_cause(root_cause: dict[str, Any]) -> str:
    """Why the extractor found no decisive signal, in words for the LLM (every request has a root-cause section)."""
    warnings = root_cause.get("warnings") or []
    if warnings:
        return (f"the log has no exception, error code, collective / out-of-memory error or ERROR-level line; "
                f"only INFO lines and {len(warnings)} warning(s), which never decide a class on their own")
    return ("the log has no exception, error code, collective / out-of-memory error or ERROR-level line (only INFO "
            "or unclassified lines); decide from the gate and the excerpt, or answer unknown")


def asks_llm(verdict: Classification) -> bool:
    """The LLM is asked when the deterministic stages abstain, and (REVIEW_TENTATIVE) to review a tentative answer."""
    return verdict.method == "none" or (REVIEW_TENTATIVE and verdict.tentative)


def make_classify_node(deps: RunDeps):
    def node(state: dict[str, Any]) -> dict[str, Any]:
        failed = last_failed_gate(state)
        text = failed.get("failure_text", "")
        if UNAPPROVED in f"{failed.get('summary', '')}\n{text}":
            # the gate was refused its run, not failed by the code: ask the user again (the work node's pending
            # branch), never classify it or send a repair over the user's files
            phase = _gate_phase(failed["gate"])
            deps.trajectory.append("approval_missing", gate=failed["gate"], phase=phase)
            return {"phase": phase, "code_approval": {"pending": phase}, "last_failure": None}
        # the gate's own verdict (its problem lines, joined in the summary) is evidence besides the run's output
        verdict = classify(text, failed.get("finding_codes", []), gate_verdict=[failed.get("summary", "")])
        primary = verdict.root_cause.get("primary") or {}
        failure: dict[str, Any] = {
            "gate": failed["gate"], "case_id": verdict.case_id, "owner": verdict.owner, "method": verdict.method,
            "confidence": verdict.confidence, "autofix": verdict.autofix,
            "diagnosis": meta_path_said(failed.get("summary", "")) + verdict.diagnosis,
            "excerpt": text[-3000:], "finding_codes": failed.get("finding_codes", []),
            "root_cause": primary.get("text", ""),
        }
        said_error = innermost_error(primary.get("text", ""))
        if verdict.case_id and said_error and said_error not in failure["diagnosis"]:
            # a case's text is general: the error this run met says which module, file or value it was
            failure["diagnosis"] += f" This run's error: {said_error}"
        opinion = None
        route_to = None  # set when an LLM abstention rules out the failed gate's phase
        artifacts, changed_last = run_artifacts(deps.ctx, state, failed)
        said = f"{failed.get('summary', '')}\n{text}"
        context = context_owner(said, artifacts, changed_last) if verdict.method == "none" else None
        decided = run_facts_owner(said, artifacts, state, deps.ctx, gate_lines=failed.get("summary", ""),
                                  findings=failed.get("findings"))
        if decided is None and failed["gate"] == "G1" and verdict.owner == "data":
            decided = source_batch_owner(said, artifacts)  # G1's batch is the source's own: not the data path's
        if decided is None and verdict.owner == "config" and failed.get("data_settings"):
            # G2 found the YAML's data settings the failure names to be the derived ones: the records contradict them
            decided = derived_settings_owner(keys_named(said, artifacts) + keys_valued(said, artifacts),
                                             failed["data_settings"], artifacts)
        if decided is None and verdict.owner == "config" and verdict.autofix:
            # the case's own YAML fix is already the run's setting: the request came from the run's code
            decided = fix_in_place_owner(verdict.autofix, said, artifacts)
        if decided is not None and decided.owner != verdict.owner:
            # the run's own facts decide against the case's usual owner (whose registration, whose import)
            failure.update(context_failure(decided, failed["gate"], primary, None, overrode=True),
                           overrode=f"{verdict.case_id or verdict.owner} ({verdict.method}, confidence "
                                    f"{verdict.confidence})")
            verdict = Classification(None, decided.owner, 1.0, "regex", "")  # decided: nothing left for the LLM
        if asks_llm(verdict):
            view = PolicyView(phase="classify", state=state, messages=[], tools=[], ctx=deps.ctx)
            settings = run_settings(deps.ctx.target, deps.ctx.model_name)
            opinion = deps.policy.classify(text, view, evidence=llm_evidence(
                failed["gate"], verdict, settings, runtime_facts(state.get("runtime")),
                context_lines(said, artifacts, context)))
        if verdict.tentative:  # reviewed: the LLM's owner overrides; its abstention (or no LLM) leaves it standing
            if opinion and opinion.get("owner"):
                failure.update(opinion, overrode=f"{verdict.case_id or verdict.owner} ({verdict.method}, "
                                                 f"confidence {verdict.confidence})")
            elif opinion:
                failure.update({k: v for k, v in opinion.items() if k in ("tokens", "requests", "prompt_chars")},
                               llm_review=opinion.get("diagnosis", "")[:600])
        elif verdict.method == "none" and not failure.get("overrode"):
            if opinion and opinion.get("owner"):
                failure.update(opinion)
            elif context is not None:  # the run's own context decides where the excerpt did not
                failure.update(context_failure(context, failed["gate"], primary, opinion))
            elif opinion:  # the LLM abstained: routed like a deterministic abstention, its reason kept
                phase_of_gate = _gate_phase(failed["gate"])
                fits = opinion.get("fits") or []
                between = f" (possible owners: {', '.join(fits)})" if fits else ""
                fit_phases = [OWNER_TO_PHASE[owner] for owner in fits if owner in OWNER_TO_PHASE]
                if fit_phases and phase_of_gate not in fit_phases:
                    # the failed gate's phase is one the LLM ruled out: an attempt there could not fix it
                    route_to = fit_phases[0]
                    back = (f"returning to {route_to}, the first phase the LLM left possible (the failed gate "
                            f"{failed['gate']}'s phase, {phase_of_gate}, is not among them)")
                else:
                    back = f"returning to {phase_of_gate}, the phase whose gate ({failed['gate']}) failed"
                failure.update(opinion, diagnosis=f"Unknown failure: the LLM found the evidence does not decide the "
                                                  f"owner{between} ({opinion.get('diagnosis', '')[:600]}); {back}.")
            else:
                phase_of_gate = _gate_phase(failed["gate"])
                failure.update(owner=None, method="gate-default",
                               diagnosis=f"Unknown failure: no failure case fits and no LLM verdict; returning to "
                                         f"{phase_of_gate}, the phase whose gate ({failed['gate']}) failed. "
                                         f"Root cause: {primary.get('text') or 'none found in the log'}")
        if (failure.get("owner") or phase_owner(route_to, failed["gate"])) == "config":
            # the YAML keys the failure names, as data for the config phase's repair: from the error and the run's
            # own facts about it (a context rule's reason names the key it decided on), never from a case's advice
            failure["keys"] = config_keys(said, artifacts, [v.reason for v in (context, decided) if v is not None])
        pointer = where_to_fix(failure.get("owner") or phase_owner(route_to, failed["gate"]), deps.ctx, state, said,
                               artifacts)
        if pointer and pointer not in failure.get("diagnosis", ""):
            # an owner's files first (the report shows the diagnosis cut); with no owner, the routing note first,
            # then the files, then the root cause (a long quoted error would push the files past the cut)
            said = failure.get("diagnosis", "")
            note, cause = said.split(" Root cause: ", 1) if " Root cause: " in said else (said, "")
            failure["diagnosis"] = (f"{pointer} {said}" if failure.get("owner") else
                                    f"{note} {pointer}" + (f" Root cause: {cause}" if cause else "")).strip()
        named = variables_valued(said, artifacts) if failure.get("owner") == "environment" else ""
        if named:
            # whatever decided the owner (a case, the context), the variable that set the value the error names is
            # the fix: first, before the report's cut (the context's reason says it last)
            sentence = named.strip("; ")
            rest = failure.get("diagnosis", "").replace(named, "")
            failure["diagnosis"] = sentence[:1].upper() + sentence[1:] + ". " + rest
        recurred = recurrence(state, failed, failure)
        if recurred:
            failure.update(recurred)
        # an LLM verdict's cost: its tokens count against the run's budget like a decision's; the trajectory keeps
        # requests and prompt size for benchmarks/bench_llm_run.py (not the failure shown to the next phase)
        usage = {k: int(failure.pop(k, 0) or 0) for k in ("tokens", "requests", "prompt_chars")}
        counters = bump(state.get("counters"), tokens=usage["tokens"])
        phase = route_to or OWNER_TO_PHASE.get(failure["owner"] or "", _gate_phase(failed["gate"]))
        attempts = dict(state.get("attempts", {}))
        attempts[phase] = attempts.get(phase, 0) + 1
        deps.trajectory.append("classify", **{k: v for k, v in failure.items() if k != "excerpt"}, route=phase,
                               **usage)
        deps.emit("classify", gate=failed["gate"], owner=failure["owner"], case_id=failure["case_id"], route=phase)
        if attempts[phase] > deps.spec.budgets.phase_attempts:
            return {"attempts": attempts, "last_failure": failure, "counters": counters, "phase": "report",
                    "exit_status": EXIT_GATE_FAILED,
                    "exit_detail": f"{failed['gate']} still failing after {deps.spec.budgets.phase_attempts} "
                                   f"attempts of phase {phase}: {failure.get('case_id') or failure['diagnosis'][:200]}"}
        return {"attempts": attempts, "last_failure": failure, "counters": counters, "phase": phase,
                "gates": gates_before(state.get("gates", {}), phase)}

    return node


_CAUSE = re.compile(r"caused by (?P<cause>\w+(?:Error|Exception|Warning)?: [^\n]+?)(?: \(raised in |$)")


def innermost_error(text: str, limit: int = 300) -> str:
    """The most specific error a root-cause line states: its innermost ``caused by …`` when it has one (a wrapper's
    "Could not import module X" hides the import that failed), else the line itself; cut to ``limit``."""
    causes = _CAUSE.findall(text or "")
    said = (causes[-1] if causes else (text or "").strip().splitlines()[0] if (text or "").strip() else "")
    return said[:limit]


def recurrence(state: dict[str, Any], failed: dict[str, Any], failure: dict[str, Any]) -> dict[str, Any] | None:
    """When this gate failed before with the same case and a repair ran in between, the case's canned advice has
    already been followed once: the next phase is told that the previous fix did not work and shown this failure's
    own evidence (the gate's problem lines: the named tensor, the value) before the advice, not the advice alone
    (live run 7 got the same "call init_weights() in to_empty" text for both NaNs). None when it is no recurrence."""
    case = failure.get("case_id")
    history = state.get("gate_history") or []
    if not case:
        return None
    last = max(i for i, r in enumerate(history) if not r.get("passed"))  # the failure being classified
    earlier = [r for r in history[:last] if r.get("gate") == failed["gate"] and not r.get("passed")]
    same = [r for r in earlier if classify(r.get("failure_text", ""), r.get("finding_codes", []),
                                           gate_verdict=[r.get("summary", "")]).case_id == case]
    if not same:
        return None
    phase = OWNER_TO_PHASE.get(failure.get("owner") or "", _gate_phase(failed["gate"]))
    repair = next((h.get("summary", "") for h in state.get("handoff") or [] if h.get("phase") == phase), "")
    evidence = failed.get("summary") or failure.get("root_cause") or ""
    said = (f"{failed['gate']} failed again with the same case ({case}), {len(same) + 1} times now: the previous fix "
            f"did not work" + (f" (the {phase} phase's repair: {repair[:400]})" if repair else "") + ". This "
            f"failure's own evidence: {evidence[:800]}. Check the fix against that evidence (run the check that "
            f"reproduces it) before finishing; the case's general advice, already followed once: "
            + failure.get("diagnosis", ""))
    return {"diagnosis": said, "recurrence": len(same) + 1}


def context_lines(text: str, artifacts: Any, verdict: ContextVerdict | None) -> list[str]:
    """The run's context for the LLM: the frames of the failure in this run's artifacts and what the context rules
    make of them (knowledge/failure_context.py). [] when there is none."""
    lines = [f"frame in this run's {owner} artifact: {path}:{line}" for path, line, owner in
             run_frames(text, artifacts)[-5:]]
    if verdict is not None:
        lines.append(f"the run's context points to {verdict.owner} ({verdict.rule}): {verdict.reason}")
    return lines


def context_failure(context: ContextVerdict, gate: str, primary: dict[str, Any],
                    opinion: dict[str, Any] | None, overrode: bool = False) -> dict[str, Any]:
    """The failure record when the run's context decides an owner the deterministic stages (and the LLM, when it
    was asked) left open: the owner, the rule that decided and the file or key to change, in the diagnosis."""
    llm = f" The LLM abstained: {opinion.get('diagnosis', '')[:300]}" if opinion else ""
    decides = (f"the run's own facts decide against that case's usual owner ({context.rule})" if overrode else
               f"No failure case decides the owner; the run's context does ({context.rule})")
    usage = {k: v for k, v in (opinion or {}).items() if k in ("tokens", "requests", "prompt_chars")}
    return {**usage, "owner": context.owner, "method": "context", "confidence": CONTEXT_CONFIDENCE[context.rule],
            "autofix": None,  # a case's autofix edits its own owner's artifact, not the one the context decided
            "context": context.to_dict(),
            "diagnosis": f"{decides}: {context.reason}. Failed gate {gate}; root cause: "
                         f"{primary.get('text') or 'none found in the log'}.{llm}"}


def phase_owner(route_to: str | None, gate: str) -> str:
    """The owner whose files an unowned failure goes back to (the phase it is routed to)."""
    return route_to or _gate_phase(gate)


def _gate_phase(gate: str) -> str:
    return GATE_PHASE.get(gate, "config")
