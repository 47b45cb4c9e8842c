"""Free text in the chat: a question about the migration is answered from the run's state (no LLM needed for
status-type questions); anything else is an instruction for the agent."""

from __future__ import annotations

from typing import Any

QUESTION_WORDS = {"what", "which", "why", "how", "where", "when", "who", "is", "are", "did", "does", "do", "can",
                  "has", "have", "was", "were", "show", "status"}


def is_question(text: str) -> bool:
    words = text.strip().lower().split()
    return text.strip().endswith("?") or (bool(words) and words[0] in QUESTION_WORDS)


def _plan_fact(plan: dict[str, Any], key: str, label: str) -> str:
    return f"{label}: {plan[key]}" if plan.get(key) is not None else f"{label}: not decided yet (no plan)"


def _gate_word(record: dict[str, Any], stale_why: str | None) -> str:
    if not record.get("passed"):
        return "FAIL"
    return f"stale, re-run ({stale_why})" if stale_why else "PASS"


def answer(text: str, state: dict[str, Any], stale: dict[str, str] | None = None) -> str:
    """The state's answer to a question; several topics may match, each adds its line. ``stale`` (gate -> why, from
    ``gate_currency.stale_gates``) keeps a PASS whose commit left the branch from being called a PASS here too."""
    stale = stale or {}
    q = text.lower()
    plan = state.get("plan") or {}
    out: list[str] = []
    if "template" in q:
        out.append(_plan_fact(plan, "template", "template"))
    if "branch" in q:
        out.append(_plan_fact(plan, "data_branch", "data branch"))
    if "model_id" in q or "model id" in q or "register" in q:
        out.append(_plan_fact(plan, "model_id", "model_id"))
    if "dataset" in q:
        out.append(_plan_fact(plan, "dataset_type", "dataset_type"))
    if "route" in q or "custom" in q:
        out.append(_plan_fact(plan, "route", "route"))
    if "similar" in q:
        out.append(_plan_fact(plan, "similar_case", "similar case"))
    if "why" in q and plan.get("reasons"):
        out += [f"- {r}" for r in plan["reasons"]]
    if "fail" in q or "error" in q or "wrong" in q:
        f = state.get("last_failure")
        out.append(f"last failure: gate {f.get('gate')} → case {f.get('case_id')} (owner {f.get('owner')}): "
                   f"{str(f.get('diagnosis', ''))[:400]}" if f else "no gate failure pending")
    if "gate" in q or "pass" in q:
        gates = state.get("gates", {})
        out.append("gates: " + (", ".join(f"{g} {_gate_word(r, stale.get(g))}" for g, r in sorted(gates.items()))
                                or "none run yet"))
    if "launch" in q or "token" in q or "step" in q or "cost" in q:
        c = state.get("counters", {})
        out.append(f"launches {int(c.get('launches', 0))}, policy steps {int(c.get('policy_steps', 0))}, "
                   f"tool calls {int(c.get('tool_calls', 0))}, tokens {int(c.get('tokens', 0))}")
    if "instruction" in q:
        out.append("instructions given: " + (state.get("instructions") or "(none)").replace("\n", " | "))
    if "report" in q:
        out.append(f"report: {(state.get('artifacts') or {}).get('report') or 'not written yet (written at the end)'}")
    if not out:  # a general status answer
        out.append(f"phase {state.get('phase', 'not started')}; exit status {state.get('exit_status') or 'none yet'}"
                   + (f" ({state.get('exit_detail')})" if state.get("exit_detail") else ""))
        if plan:
            out.append(f"plan: {plan.get('model_id')} via {plan.get('route')}, data branch {plan.get('data_branch')}, "
                       f"template {plan.get('template')}")
    return "\n".join(out)
