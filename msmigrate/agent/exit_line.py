"""The first line of every verification report: what the run's exit is, why, and what to do next.

Every exit gets one — a graph exit (success, failed gates, budget, precheck, rejected, unsupported, needs an
accelerator) and the ones the run loop ends with outside the graph (an error in a node, an LLM endpoint that could
not be reached, a stop by the user, a pause for an approval). A "success" whose gate records no longer prove the
work branch (an ``/undo`` after the run ended) reads "stale, re-run" instead: the report never certifies a branch
it did not test."""

from __future__ import annotations

import shlex
from typing import Any

from msmigrate.agent.gate_currency import GATE_ORDER, STALE
from msmigrate.agent.state import (EXIT_AWAITING_APPROVAL, EXIT_BUDGET, EXIT_ERROR, EXIT_GATE_FAILED,
                                   EXIT_NEEDS_ACCELERATOR, EXIT_OK, EXIT_PRECHECK, EXIT_REJECTED, EXIT_STOPPED,
                                   EXIT_UNSUPPORTED, PHASE_GATES)

ALL_GATES = GATE_ORDER
PHASE_OF = {g: phase for phase, gates in PHASE_GATES.items() for g in gates}


# a G0 stop whose owner G0 knows (nodes/prepare.py): no phase can mend the user's records or the host, so the run
# stops and says whose the fix is
_PRECHECK_TODO = {
    "data": "the fix is the data's (owner: data) — make the records G0 names below usable (or point the spec's `data` "
            "at records that are), then start a new run",
    "environment": "the fix is the environment's (owner: environment) — mend the runtime or host G0 names below (the "
                   "spec's `runtime_python` / MSMIGRATE_RUNTIME_PYTHON, the host's limits), then start a new run",
}


def todo_for(state: dict[str, Any], runs_dir: str | None = None) -> str:
    """What to do after this exit, as commands where there is one (``runs_dir``: where the run lives)."""
    rid = state.get("run_id")
    where = f" --runs-dir {shlex.quote(runs_dir)}" if runs_dir else ""
    resume = f"`msmigrate run --resume {rid}{where}`"
    return {
        EXIT_OK: "review the edits (Changes in the target, below) and check the work branch out; the CPU gates do "
                 "not prove NPU kernels or throughput (Risks, below)",
        EXIT_GATE_FAILED: f"read the failing gate's evidence below; `msmigrate chat --resume {rid}{where}` then "
                          "`/retry PHASE` repairs from that phase",
        EXIT_BUDGET: "raise the budget named above (`budgets` in the spec) and start the run again",
        EXIT_PRECHECK: _PRECHECK_TODO.get(((state.get("gates") or {}).get("G0") or {}).get("owner"),
                                          "fix the inputs G0 names below, then start a new run"),
        EXIT_ERROR: f"the traceback is in the run's trajectory.jsonl; {resume} continues from the last checkpoint",
        EXIT_REJECTED: "nothing ran after your answer; start a new run with the settings you want",
        EXIT_STOPPED: f"{resume} (or `/retry` in chat) continues where it stopped",
        EXIT_AWAITING_APPROVAL: f"`msmigrate run --resume {rid}{where} --approve` (or --reject, or --set KEY=VALUE "
                                "to change the launch)",
        EXIT_NEEDS_ACCELERATOR: "run the delivered launch on a machine with the accelerator (next actions, below)",
    }.get(state.get("exit_status") or "", f"{resume} continues the run")


def headline(state: dict[str, Any], results: dict[str, tuple[str, Any, str]], runs_dir: str | None = None) -> str:
    """``results``: gate -> (result word, record, why stale) as the report's gate table shows them."""
    status, detail = state.get("exit_status"), str(state.get("exit_detail") or "").strip().rstrip(".")
    if status == EXIT_UNSUPPORTED:  # its detail already says what to do (PolicyUnsupported.line)
        return f"**{status}** — {detail}"
    stale = [g for g, (word, _, _) in results.items() if word == STALE]
    if status == EXIT_OK and stale:
        why = results[stale[0]][2]
        phase = PHASE_OF[stale[0]] if PHASE_OF[stale[0]] != "prepare" else "model"
        retry = phase if phase != "verify" else "config"
        return (f"**{STALE}** — the run ended {EXIT_OK}, but {', '.join(stale)} no longer prove the work branch "
                f"({why}). What to do: `msmigrate chat --resume {state.get('run_id')}"
                f"{f' --runs-dir {shlex.quote(runs_dir)}' if runs_dir else ''}`, then `/retry {retry}` runs "
                "them again")
    todo = state.get("exit_todo") or todo_for(state, runs_dir)
    return f"**{status}** — {detail or 'no detail recorded'}. What to do: {todo}"
