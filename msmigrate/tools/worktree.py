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

from msmigrate.core.git import GitError, git as run_git

WORKTREE_DIR = "worktree"
OWNER_FILE = "worktree.json"  # in the run folder: the checkout and branch this run created
LOCK_NAME = "msmigrate.lock"
_SAFE_RUN_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")


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
    """``core.git.git`` (no hooks, no fsmonitor, scrubbed environment) with its failures as ``WorktreeError``."""
    try:
        return run_git(cwd, *args, check=check)
    except GitError as exc:
        raise WorktreeError(str(exc)) from None


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


def release_worktree(checkout: Path, path: Path, editable: list[str] | None = None) -> str | None:
    """Remove the run's work tree (its branch stays); None when it was removed (or is no work tree of ``checkout``),
    else why it was left. Only a path registered as a work tree of ``checkout`` and not the main checkout itself is
    ever removed, and never one that holds anything git does not (files written but not committed, a lock of a
    writer): the work tree may then hold the only copy of an edit, so it is left where it is. ``editable``: the
    run's editable paths; an untracked file outside them is an output of the target's own runs (a dataset cache),
    never an edit of the run (its writes go only there), so it does not keep the tree."""
    checkout, path = Path(checkout).resolve(), Path(path).resolve()
    if path == checkout:
        return f"{path} is the user's checkout, never removed"
    if not _registered(checkout, path):
        return None  # not a work tree of this checkout (already released): nothing to remove, nothing kept
    if not (path / ".git").exists():  # deleted by hand: only git's registry entry is left
        with target_lock(checkout):
            git(checkout, "worktree", "prune")
        return None
    dirt = uncommitted(path)
    if editable is not None:
        dirt = [(code, name) for code, name in dirt if code != "??" or _under(name, editable)]
    locks = held_locks(path)
    if dirt or locks:
        what = [*(f"{code} {name}" for code, name in dirt[:20]), *(f"lock {lock}" for lock in locks)]
        return f"work tree {path} left in place: it holds what its branch does not ({'; '.join(what)})"
    with target_lock(checkout):
        # forced only past what is regenerated (bytecode caches): everything else was checked clean above
        git(checkout, "worktree", "remove", "--force", str(path), check=False)
        git(checkout, "worktree", "prune")
    return None if not path.exists() else f"git did not remove the work tree {path}; it is left in place"


# ------------------------------------------------------------------------------------- a writer that died mid-commit
# A kill -9 of the agent during a write or its ``git commit`` (an OOM kill of the cgroup, a power cut) leaves what
# the resumed run must not build on blindly: git's lock files (every later commit is refused while they exist), a
# file written on disk but never committed (the branch does not hold it), and the temporary file of a write that
# never reached its rename. The helpers below find them; the runner decides and records what it did.

def _under(name: str, paths: list[str]) -> bool:
    """``name`` (a path relative to the work tree) is one of ``paths`` or inside one of them (a folder path)."""
    return any(name == p.rstrip("/") or name.startswith(p.rstrip("/") + "/") for p in paths)


TMP_SUFFIX = ".msmigrate-tmp"  # safe_fs.write_text's temporary files
_REGENERATED = ("__pycache__/",)  # written by importing the code, never an edit: not dirt


def git_dir(path: Path) -> Path:
    return Path(git(path, "rev-parse", "--path-format=absolute", "--git-dir").stdout.strip())


def _lock_files(path: Path) -> list[Path]:
    gd, common = git_dir(path), common_git_dir(path)
    branch = git(path, "symbolic-ref", "--quiet", "HEAD", check=False).stdout.strip()
    # the work tree's own git dir: index.lock, HEAD.lock, next-index-<pid>.lock of a partial commit, …
    found = sorted(gd.glob("*.lock")) + ([common / f"{branch}.lock"] if branch else [])
    return [p for p in found if p.exists()]


def _descendants_of_self() -> set[int]:
    """This process and its descendants (GitPython's persistent ``git cat-file`` helpers among them)."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parent[int(stat.parent.name)] = int(fields[1])
    mine, grew = {os.getpid()}, True
    while grew:
        more = {pid for pid, ppid in parent.items() if ppid in mine} - mine
        mine |= more
        grew = bool(more)
    return mine


def _writer_alive(tree: Path, lock: Path) -> bool | None:
    """Whether a live process other than this one (and its children) may be writing: it has ``lock`` open, works
    in ``tree`` (git's cwd, as GitPython starts it) or names it on its command line (``git -C tree``). None when
    this system has no /proc to ask. Its own descendants are not asked: this process decides while it writes
    nothing (between graph steps)."""
    proc = Path("/proc")
    if not (proc / "self" / "fd").is_dir():
        return None
    tree_s, lock_s, mine = str(tree), str(lock), _descendants_of_self()
    for entry in proc.glob("[0-9]*"):
        if int(entry.name) in mine:
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if cwd == tree_s or cwd.startswith(tree_s + "/") or tree_s in cmdline:
                return True
            if any(os.readlink(fd) == lock_s for fd in (entry / "fd").iterdir()):
                return True
        except OSError:  # a process that ended while it was looked at, or one we may not inspect
            continue
    return False


def held_locks(path: Path) -> list[str]:
    """git lock files in the work tree's git dirs (whoever holds them)."""
    return [str(p) for p in _lock_files(path)]


def clear_dead_locks(path: Path, min_age_s: float = 1.0) -> list[str]:
    """Remove git lock files of this work tree whose writer is dead (no live process holds them, works in the tree
    or names it); returns the removed paths. A lock younger than ``min_age_s`` is left (its git may be starting),
    and so is every lock when this system cannot tell whether its writer lives (no /proc)."""
    import time

    cleared = []
    path = Path(path).resolve()
    for lock in _lock_files(path):
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            continue
        if age < min_age_s or _writer_alive(path, lock) is not False:
            continue
        lock.unlink(missing_ok=True)
        cleared.append(str(lock))
    return cleared


def uncommitted(path: Path, paths: list[str] | None = None) -> list[tuple[str, str]]:
    """(status code, path) of what the work tree holds that its HEAD does not: tracked files changed or deleted,
    untracked files not ignored (under ``paths`` when given). Bytecode caches are left out."""
    out = git(path, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", *(paths or [])).stdout
    entries, items = [], out.split("\0")
    i = 0
    while i < len(items):
        item = items[i]
        i += 1
        if len(item) < 4:
            continue
        code, name = item[:2], item[3:]
        if code[0] in "RC":  # a rename's source path follows as its own item
            i += 1
        if not any(part in name for part in _REGENERATED) and not name.endswith(".pyc"):
            entries.append((code, name))
    return entries


def commit_uncommitted(path: Path, message: str, env: dict[str, str],
                       paths: list[str] | None = None) -> tuple[str | None, list[str], list[str]]:
    """Commit what the work tree holds beyond HEAD under ``paths`` (one commit, ``message``), after deleting the
    temporary files of writes that never reached their rename (their content was never a whole file). Returns (new
    commit or None, committed paths, removed temporary files)."""
    dirt = uncommitted(path, paths)
    removed = [name for _, name in dirt if Path(name).name.endswith(TMP_SUFFIX)]
    for name in removed:
        (Path(path) / name).unlink(missing_ok=True)
    keep = [name for _, name in dirt if name not in removed]
    if not keep:
        return None, [], removed
    git(path, "add", "-A", "-f", "--", *keep)
    proc = run_git(path, "commit", "--no-verify", "-q", "-m", message, check=False, env_extra=env)
    if proc.returncode != 0:
        raise WorktreeError(f"git commit failed in {path}: {proc.stderr.strip()[:500]}")
    return git(path, "rev-parse", "HEAD").stdout.strip(), keep, removed


def discard_worktree(wt: Worktree) -> None:
    """Undo ``open_worktree`` for a run that failed while it was being opened (nothing ran in it): remove the work
    tree, its branch and its base tag. Only for ``wt.created``; a reused (resumed) work tree is never discarded."""
    if not wt.created:
        return
    with target_lock(wt.checkout):
        git(wt.checkout, "worktree", "remove", "--force", str(wt.path), check=False)
        git(wt.checkout, "worktree", "prune")
        git(wt.checkout, "branch", "-D", wt.branch, check=False)
        git(wt.checkout, "tag", "-d", f"{wt.branch}/base", check=False)


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
