"""Whether a gate record still proves what the work branch holds now.

Every record names the commit it ran on (``target_commit``: the work tree's HEAD, which the gates only read clean —
``nodes/work.py``). A PASS counts only while
- that commit is still on the work branch (an ancestor of its tip, or the tip): ``/undo``, ``rollback`` or a reset
  past it leave a record about code the branch no longer holds, and
- nothing the gate depended on changed between that commit and the tip — or a later gate that is itself current
  ran on a commit at or after it. The second half is the rule the phases already follow (``proved_commit``): a
  later phase may finish a file an earlier one drafted (the config phase completing the YAML the data phase wrote),
  and the later gate proves that edit; a change after every later proof leaves the earlier gate stale too.

What a gate depends on: G0 checks the inputs and the target as the run found them (nothing the run edits); G1 the
model plugin (its folder and the files the model phase delivered); G2 those plus the data phase's files, the
model's dataset folder and the registry files data branch B may extend; G3–G6 read the delivered config and
launch everything, so any change in the tree counts.

Anything else reads "stale, re-run" in the report and the chat's ``/status``; the places that change the branch or
the launch (``/undo``, ``/retry``, an approval edit, a resume) drop exactly those records from the state (the
history keeps them), so the graph runs their gates again instead of counting them as passed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msmigrate.agent.state import PHASE_GATES
from msmigrate.core.run_context import BRANCH_B_FILES, DEFAULT_EDITABLE
from msmigrate.tools.worktree import git

GATE_ORDER = [g for gates in PHASE_GATES.values() for g in gates]
STALE = "stale, re-run"


def _phase_files(state: dict[str, Any], phases: tuple[str, ...]) -> list[str]:
    return [f for h in state.get("handoff") or [] if h.get("phase") in phases for f in h.get("files_written") or []]


def depends_on(gate: str, state: dict[str, Any], model_name: str) -> list[str] | None:
    """The target paths a gate's verdict depends on; [] for none the run edits, None for the whole tree."""
    if gate == "G0":
        return []
    plan = state.get("plan") or {}
    if gate == "G1" and plan.get("plugin_dir"):
        return [plan["plugin_dir"], *_phase_files(state, ("model",))]
    if gate == "G2" and plan.get("plugin_dir"):
        dataset_dir = DEFAULT_EDITABLE[1].format(name=model_name)
        return [plan["plugin_dir"], dataset_dir, *BRANCH_B_FILES, *_phase_files(state, ("model", "data"))]
    return None


class BranchView:
    """Reads the run's work branch from the user's checkout (refs are shared by every work tree; the run's own
    work tree may already be released)."""

    def __init__(self, checkout: Path, branch: str):
        self.checkout, self.branch = Path(checkout), branch
        proc = git(self.checkout, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}", check=False)
        self.tip = proc.stdout.strip() if proc.returncode == 0 else None

    def holds(self, commit: str, descendant: str | None = None) -> bool:
        """``commit`` is ``descendant`` (default: the tip) or one of its ancestors."""
        descendant = descendant or self.tip
        return bool(descendant) and git(self.checkout, "merge-base", "--is-ancestor", commit, descendant,
                                        check=False).returncode == 0

    def changed(self, commit: str, paths: list[str] | None) -> list[str]:
        if paths == []:
            return []
        out = git(self.checkout, "diff", "--name-only", commit, self.tip, "--", *(paths or []), check=False)
        return [ln for ln in out.stdout.splitlines() if ln.strip()] if out.returncode == 0 else ["(git diff failed)"]


def gate_currency(ctx: Any, state: dict[str, Any]) -> dict[str, str | None]:
    """For every passed gate record of ``state["gates"]``: None when it still proves the branch tip, else why not."""
    gates = state.get("gates") or {}
    passed = [g for g in GATE_ORDER if (gates.get(g) or {}).get("passed")]
    if not passed:
        return {}
    checkout = getattr(ctx, "checkout", None)  # a context that was never attached to a work tree has none
    view = BranchView(checkout, ctx.work_branch) if checkout is not None else None
    out: dict[str, str | None] = {}
    for name in reversed(passed):  # later gates first: a current later gate may carry an earlier one's proof
        commit = gates[name].get("target_commit")
        paths = depends_on(name, state, getattr(ctx, "model_name", ""))
        if paths == []:
            out[name] = None
        elif view is None or view.tip is None:
            out[name] = f"the work branch {ctx.work_branch} cannot be read"
        elif not commit:
            out[name] = "it recorded no commit, so what it proved cannot be compared with the branch"
        elif not view.holds(commit):
            out[name] = f"it ran on commit {commit[:12]}, which the work branch no longer holds"
        else:
            changed = view.changed(commit, paths)
            later = [g for g in passed if GATE_ORDER.index(g) > GATE_ORDER.index(name) and out.get(g) is None
                     and view.holds(commit, gates[g].get("target_commit"))]
            out[name] = None if not changed or later else (
                f"{', '.join(changed[:5])}{' …' if len(changed) > 5 else ''} changed since it ran on {commit[:12]}")
    return out


def stale_gates(ctx: Any, state: dict[str, Any]) -> dict[str, str]:
    """Only the stale ones: gate -> why."""
    return {g: why for g, why in gate_currency(ctx, state).items() if why is not None}


def invalidate(ctx: Any, state: dict[str, Any], trajectory: Any, why: str,
               also: tuple[str, ...] = ()) -> dict[str, Any]:
    """The state's gate records without the ones that no longer prove the branch (and ``also``: records the caller
    knows are stale, such as G4–G6 after the launch settings changed); the dropped ones go to the trajectory."""
    gates = dict(state.get("gates") or {})
    stale = {**stale_gates(ctx, state), **{g: why for g in also if g in gates}}
    if stale:
        trajectory.append("gates_invalidated", why=why, gates=stale)
    return {g: r for g, r in gates.items() if g not in stale}
