"""The report's "Risks" and "Next actions": about this run, as commands the user can paste.

Next actions name the branch that holds the migration, the checkout it lives in, how to look at it and take it, the
launch line of the delivered script, and — when the run did not finish green — the command that resumes it. Risks
are what this run did not prove: gates not run or failed, launches that ran on CPU only,
the user's uncommitted changes left out, the last failure the run could not repair."""

from __future__ import annotations

import shlex
from typing import Any

from msmigrate.agent.state import PHASE_GATES
from msmigrate.core.text_clip import clip

ALL_GATES = [g for group in PHASE_GATES.values() for g in group]
RESUMABLE = ("error", "stopped_by_user", "awaiting_approval")  # the graph did not end: resume goes on
RETRYABLE = ("gates_failed", "budget_exhausted")  # the graph ended; the chat's /retry reopens it at a phase


def _q(value: Any) -> str:
    return shlex.quote(str(value))


def next_actions(state: dict[str, Any], where: dict[str, Any]) -> list[str]:
    branch, checkout = where.get("branch") or f"msmigrate/{state.get('run_id')}", where.get("checkout")
    plan, status = state.get("plan") or {}, state.get("exit_status")
    git = f"git -C {_q(checkout)}" if checkout else "git"
    lines = [f"- The migration is on branch `{branch}`" + (f" of `{checkout}`" if checkout else "") + "; review it: "
             f"`{git} diff {branch}/base..{branch}`"]
    if status in ("success", "needs_accelerator"):
        lines.append(f"- Take it into your branch: `{git} merge --no-ff {branch}` (or look first: "
                     f"`{git} switch {branch}`)")
        script = plan.get("script_path")
        if script:
            lines.append(f"- Train with the delivered launch script on the Ascend machine, from the checkout: "
                         f"`cd {_q(checkout or '.')} && bash {_q(script)}`")
    elif where.get("runs_dir"):
        ids = f"--resume {state.get('run_id')} --runs-dir {_q(where['runs_dir'])}"
        if status in RESUMABLE:  # the graph stopped mid-way: it continues from its last finished step
            lines.append(f"- Continue this run from its last finished step: `msmigrate run {ids}`")
        elif status in RETRYABLE:  # the graph ended: reopen it at the failing phase, with the evidence at hand
            lines.append(f"- Read the failing gate's evidence in `{where['runs_dir']}/{state.get('run_id')}/"
                         f"evidence.json`, then reopen the run at that phase: `msmigrate chat {ids}` and `/retry`")
    return lines


def _devices(gates: dict[str, Any]) -> set[str]:
    return {str(ev.get("device")) for g in ("G4", "G5", "G6") for ev in (gates.get(g) or {}).get("evidence", [])
            if ev.get("device")}


def risks(state: dict[str, Any], megatron: bool = False) -> list[str]:
    gates, out = state.get("gates") or {}, []
    not_run = [g for g in ALL_GATES if g not in gates]
    failed = [g for g in ALL_GATES if g in gates and not gates[g].get("passed")
              and not gates[g].get("needs_accelerator")]
    waiting = [g for g in ALL_GATES if (gates.get(g) or {}).get("needs_accelerator")]
    if failed:
        out.append(f"- Failed gates: {', '.join(failed)} — the migration is not proven there.")
    if not_run:
        out.append(f"- Not run: {', '.join(not_run)} — nothing about what they check is proven.")
    if waiting:
        out.append(f"- Needs an accelerator: {', '.join(waiting)} — run them on the Ascend machine.")
    devices = _devices(gates)
    if devices and devices <= {"cpu"}:
        out.append("- The training gates ran on CPU only: NPU kernels, fused ops, HCCL and throughput are not "
                   "proven; run the delivered launch on the Ascend machine before relying on speed or precision.")
    elif megatron:
        out.append("- Megatron route: G4–G6 need the Ascend machine; `--load` points at the converter's output.")
    if str((state.get("artifacts") or {}).get("target_dirty")) == "True":
        out.append("- Your checkout had uncommitted changes; the run worked from its committed HEAD (in its own git "
                   "worktree) and left them untouched — commit them if the migration should include them.")
    failure = state.get("last_failure")
    if failure and state.get("exit_status") != "success":
        out.append(f"- Last failure: gate {failure.get('gate')} → case `{failure.get('case_id') or 'unknown'}` "
                   f"(owner {failure.get('owner') or 'unknown'}): {clip(failure.get('diagnosis', ''), 400)}")
    return out or ["- None found in this run's evidence."]
