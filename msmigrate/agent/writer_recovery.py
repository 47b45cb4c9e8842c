"""The work tree as the gates and a resumed run must find it: on the work branch, no lock of a dead writer, nothing
on disk that git does not hold.

Why: a ``kill -9`` of the agent inside ``git commit`` (an OOM kill of the cgroup, a power cut) left ``index.lock``
behind and the written files uncommitted; the resumed run's next writes were refused, the gates read the files on
disk and passed, and the end of the run removed the work tree with the only copy of the files while the branch held
none of them. Now a lock no live process holds is removed, a whole file on disk but not in git is committed (one
commit, named as a recovery), the temporary file of a write that never reached its rename is deleted, and each of
these is a line in the trajectory. A gate never runs on anything else: its record names the commit it proved."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from msmigrate.tools.file_writer import AUTHOR, TRAILER
from msmigrate.tools.worktree import (WorktreeError, clear_dead_locks, commit_uncommitted, git, held_locks,
                                     uncommitted)


def settle_worktree(ctx: Any, trajectory: Any, why: str, plan: dict[str, Any] | None) -> str | None:
    """Make the run's work tree fit for a gate (see the module text); None when it is, else why it cannot be (the
    gate is then not run). ``plan``: the run's plan, whose extra editable paths (a new Megatron component) count
    as the run's own like the default ones."""
    if ctx.checkout is None or not Path(ctx.target).is_dir():
        return "the run has no work tree of its own"
    ctx.plan_editable = list((plan or {}).get("editable_extra") or [])
    try:
        head = git(Path(ctx.target), "symbolic-ref", "--quiet", "--short", "HEAD", check=False).stdout.strip()
        if head != ctx.work_branch:
            return (f"the work tree {ctx.target} is on {head or 'a detached HEAD'}, not on the work branch "
                    f"{ctx.work_branch}; check it out there (or remove the work tree, a resume re-creates it)")
        cleared = clear_dead_locks(Path(ctx.target))
        if cleared:
            trajectory.append("writer_recovered", what="git lock of a dead writer removed", paths=cleared, why=why)
        live = held_locks(Path(ctx.target))
        if live:
            return f"git lock(s) held in the work tree: {', '.join(live)} (another git process is writing)"
        message = (f"msmigrate: commit writes found on disk but not in git ({why})\n\n"
                   f"A write of this run reached the disk and its commit did not.\n\n{TRAILER}: {ctx.run_id}")
        # only where the run writes (its editable paths): anything else in the tree is not the run's to deliver
        sha, committed, removed = commit_uncommitted(Path(ctx.target), message, AUTHOR, list(ctx.editable_paths))
        # anything else is not the run's to commit: a tracked file changed outside the editable paths would make the
        # gate prove what the branch does not hold. Untracked files there are outputs of the target's own runs (the
        # real framework's dataset cache under ``cache_dir/``, logs): never part of a commit, so no gate proves
        # them; they are listed in the trajectory, not refused.
        dirt = uncommitted(Path(ctx.target))
        foreign = [(code, name) for code, name in dirt if code != "??"]
        outputs = [name for code, name in dirt if code == "??"]
    except (WorktreeError, subprocess.SubprocessError, OSError) as exc:
        return f"the work tree {ctx.target} could not be checked: {exc}"
    if removed:
        trajectory.append("writer_recovered", what="temporary files of writes that never completed deleted",
                          paths=removed, why=why)
    if sha:
        trajectory.append("writer_recovered", what="files on disk but not in git committed", commit=sha,
                          paths=committed[:50], why=why)
    if outputs:
        trajectory.append("untracked_outputs", what="files the branch does not hold, outside the editable paths "
                          "(not part of the delivery; no gate proves them)", paths=outputs[:20], count=len(outputs),
                          why=why)
    if foreign:
        names = ", ".join(f"{code.strip()} {name}" for code, name in foreign[:10])
        return (f"the work tree {ctx.target} holds changes outside the run's editable paths that git does not "
                f"({names}); commit or remove them there")
    return None
