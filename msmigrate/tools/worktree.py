"""Each run works in its own ``git worktree`` of the target (DESIGN decision 12): the user's checkout is theirs.

The run's branch ``msmigrate/<run_id>`` is created from the user's current HEAD and checked out in a separate work
tree under the run directory (``runs/<run_id>/worktree``). The user's checkout — its branch, its index, its
uncommitted and untracked files — is never read for writing, reset or checked out. Concurrent runs on one target each
have their own work tree; what git itself keeps shared (refs, the worktree registry) is created under a per-target
lock (``flock`` on a file in the repository's common git dir), so two runs starting at once do not race.

Uncommitted changes in the user's checkout are *not* part of the run: the run starts from the committed HEAD. G0
records ``target_dirty`` so the report can say so.

A run only ever reopens a branch it created: the run folder keeps ``worktree.json`` (the checkout and branch it
made); a new run whose id names an existing ``msmigrate/<id>`` branch it did not create is refused instead of
adopting another run's commits as its own. A resume is asked for by id and finds its own record.

When a run ends, ``release_worktree`` removes the work tree (the branch and its tags stay), so the user can check the
branch out in their own checkout; a resume recreates it from the branch.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

WORKTREE_DIR = "worktree"
OWNER_FILE = "worktree.json"  # in the run folder: the checkout and branch this run created
LOCK_NAME = "msmigrate.lock"
_SAFE_RUN_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
# git run by msmigrate must not pick up the user's hooks or a repo-local fsmonitor/pager: none of them are needed
# for worktree bookkeeping, and each would be code the target's config chooses.
_GIT_SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.pager=cat")


class WorktreeError(RuntimeError):
    """The target cannot host a run work tree (not a git repository, no commit, bad run id)."""


@dataclass
class Worktree:
    checkout: Path  # the user's checkout (never modified)
    path: Path  # the run's work tree (every tool works here)
    branch: str
    base_commit: str
    created: bool  # False when an existing work tree/branch was reused (resume)


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["git", *_GIT_SAFE, "-C", str(cwd), *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env=_git_env())
    if check and proc.returncode != 0:
        raise WorktreeError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()[:500]}")
    return proc


def _git_env() -> dict[str, str]:
    from msmigrate.tools.subprocess_env import child_env

    return child_env()


def common_git_dir(checkout: Path) -> Path:
    out = git(checkout, "rev-parse", "--path-format=absolute", "--git-common-dir").stdout.strip()
    return Path(out)


@contextlib.contextmanager
def target_lock(checkout: Path):
    """Serialise what must not interleave between runs on one target (branch + worktree creation)."""
    lock_path = common_git_dir(checkout) / LOCK_NAME
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _branch_exists(checkout: Path, branch: str) -> bool:
    return git(checkout, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False).returncode == 0


def _registered(checkout: Path, path: Path) -> bool:
    out = git(checkout, "worktree", "list", "--porcelain").stdout
    return any(line == f"worktree {path}" for line in out.splitlines())


def _owns(run_dir: Path, checkout: Path, branch: str) -> bool:
    """Did the run in ``run_dir`` create ``branch`` of ``checkout``? Its ``worktree.json`` says so; a run folder from
    before that record (it already holds the run's checkpoints) is taken as the owner and gets one."""
    try:
        rec = json.loads((run_dir / OWNER_FILE).read_text())
        return rec.get("branch") == branch and rec.get("checkout") == str(checkout)
    except FileNotFoundError:
        return (run_dir / "checkpoints.sqlite").is_file()
    except (OSError, ValueError, AttributeError):
        return False


def _claim(run_dir: Path, checkout: Path, branch: str, base: str) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / OWNER_FILE).write_text(json.dumps({"checkout": str(checkout), "branch": branch, "base": base}))


def open_worktree(checkout: Path, run_id: str, run_dir: Path) -> Worktree:
    """The run's work tree on ``msmigrate/<run_id>``: created from the user's HEAD on first use, reused on resume
    (only by the run that created the branch; another run with the same id is refused)."""
    if not _SAFE_RUN_ID.match(run_id or ""):
        raise WorktreeError(f"run_id {run_id!r} is not a safe git ref component")
    checkout = Path(checkout).resolve()
    probe = git(checkout, "rev-parse", "--show-toplevel", check=False)
    if probe.returncode != 0:
        raise WorktreeError(f"target {checkout} is not a git repository (edits are committed on a work branch)")
    head = git(checkout, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    if head.returncode != 0:
        raise WorktreeError(f"target {checkout} has no commits yet; commit a base first")
    branch = f"msmigrate/{run_id}"
    path = (Path(run_dir) / WORKTREE_DIR).resolve()
    with target_lock(checkout):
        git(checkout, "worktree", "prune")  # a work tree deleted by hand must not block its re-creation
        if _registered(checkout, path) and (path / ".git").exists():
            base = git(path, "rev-parse", f"refs/tags/{branch}/base", check=False).stdout.strip()
            return Worktree(checkout, path, branch, base or head.stdout.strip(), created=False)
        if _branch_exists(checkout, branch):  # resume after the run released its work tree
            if not _owns(Path(run_dir), checkout, branch):
                raise WorktreeError(
                    f"branch {branch} already exists in {checkout} and was not created by this run ({run_dir}): a "
                    "new run never adopts another run's branch; resume that run by its id, or start with a new id")
            git(checkout, "worktree", "add", "--quiet", str(path), branch)
            base = git(checkout, "rev-parse", f"refs/tags/{branch}/base", check=False).stdout.strip()
            _claim(Path(run_dir), checkout, branch, base)
            return Worktree(checkout, path, branch, base or head.stdout.strip(), created=False)
        base = head.stdout.strip()
        git(checkout, "worktree", "add", "--quiet", "-b", branch, str(path), base)
        # Where the run started: rollback never goes below it, and "base" rolls back every edit of the run.
        git(checkout, "tag", "-f", f"{branch}/base", base)
        _claim(Path(run_dir), checkout, branch, base)
        return Worktree(checkout, path, branch, base, created=True)


def release_worktree(checkout: Path, path: Path) -> bool:
    """Remove the run's work tree (its branch stays). Only a path registered as a work tree of ``checkout`` and not
    the main checkout itself is ever removed."""
    checkout, path = Path(checkout).resolve(), Path(path).resolve()
    if path == checkout or not _registered(checkout, path):
        return False
    with target_lock(checkout):
        git(checkout, "worktree", "remove", "--force", str(path), check=False)
        git(checkout, "worktree", "prune")
    return not path.exists()


def checkout_state(checkout: Path) -> dict[str, str]:
    """What "the user's checkout is as it was" means: the same branch (or detached commit), HEAD and status."""
    checkout = Path(checkout)
    return {
        "branch": git(checkout, "symbolic-ref", "--quiet", "--short", "HEAD", check=False).stdout.strip(),
        "head": git(checkout, "rev-parse", "HEAD").stdout.strip(),
        "status": git(checkout, "status", "--porcelain=v1", "--untracked-files=all", "--ignored").stdout,
        "stash": git(checkout, "stash", "list", check=False).stdout,
    }


def attach(ctx) -> Worktree:
    """Point a ``RunContext`` at its run's work tree: ``ctx.checkout`` = the user's checkout, ``ctx.target`` = the
    work tree. Idempotent (a context already attached is re-opened from its checkout)."""
    checkout = Path(ctx.checkout or ctx.target)
    wt = open_worktree(checkout, ctx.run_id, ctx.run_dir)
    ctx.checkout, ctx.target = wt.checkout, wt.path
    return wt


@contextlib.contextmanager
def branch_checkout(checkout: Path, branch: str):
    """A temporary, detached work tree of ``branch`` (for reading a finished run's tree, e.g. the eval scorer's
    validator), removed afterwards; yields ``checkout`` itself when the branch does not exist."""
    import tempfile

    checkout = Path(checkout).resolve()
    if not _branch_exists(checkout, branch):
        yield checkout
        return
    with tempfile.TemporaryDirectory(prefix="msmigrate-view-") as tmp:
        path = Path(tmp) / "tree"
        with target_lock(checkout):
            git(checkout, "worktree", "add", "--quiet", "--detach", str(path), f"refs/heads/{branch}")
        try:
            yield path
        finally:
            with target_lock(checkout):
                git(checkout, "worktree", "remove", "--force", str(path), check=False)
                git(checkout, "worktree", "prune")
