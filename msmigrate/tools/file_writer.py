"""file_writer: the only way the agent changes the target, and every change is checked, committed and revertible.

Safety is enforced here, not asked of the model (DESIGN decision 7):
- a path must be relative, free of ``..``/NUL/backslashes/``.git``, shorter than a bound, and fall under one of the
  run's editable paths with exactly the same case; after resolving symlinks the real file must still lie under that
  editable path of the target root (so a symlinked directory cannot smuggle a write elsewhere);
- framework core files (reference §11 "must not change") are refused even if someone configures them editable, and so
  is anything inside the source model folder;
- registry files of data branch B (template / mm_plugin / collator) accept *additive* changes only: every non-blank
  line the file had where the run started (its base tag) must survive, in order (checked on the full before/after
  text, not on the model's claim); lines this run added itself may be changed again;
- Python must ``ast.parse``; YAML must ``yaml.safe_load`` and define no anchor twice;
- every accepted edit is one git commit on ``msmigrate/<run_id>`` (created from HEAD on first use), returned with
  its unified diff; phases are lightweight tags; ``rollback`` and ``undo_last`` hard-reset that branch — inside the
  run's own git worktree (``worktree.py``), never the user's checkout.
Expected refusals are ``ToolResult.failure`` so the policy can read the reason and adapt.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import posixpath
import re
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, Field

from msmigrate.core.git import GitError, git, git_out, head_commit, is_repo
from msmigrate.core.run_context import BRANCH_B_FILES, RunContext
from msmigrate.core.secret_mask import mask_text
from msmigrate.core.tool_result import ToolResult, make_tool
from msmigrate.tools import safe_fs
from msmigrate.tools.worktree import WorktreeError, attach

# Reference §11 "must not change": never writable, whatever the run's configuration says. Directories end with "/".
FRAMEWORK_CORE = (
    "mindspeed_mm/fsdp/train/",
    "mindspeed_mm/fsdp/models/modelhub.py",
    "mindspeed_mm/fsdp/models/base_model.py",
    "mindspeed_mm/fsdp/data/__init__.py",
    "mindspeed_mm/fsdp/data/dataloader/dataloader.py",
    "mindspeed_mm/fsdp/data/dataloader/sampler.py",
    "mindspeed_mm/fsdp/distributed/",
    "mindspeed_mm/fsdp/checkpoint/",
    "mindspeed_mm/fsdp/optimizer/",
    "mindspeed_mm/fsdp/ops/",
    "mindspeed_mm/fsdp/utils/register.py",
)
MAX_PATH_CHARS = 240
MAX_COMPONENT_CHARS = 120
MAX_CONTENT_BYTES = 2_000_000
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_DRIVE = re.compile(r"^[A-Za-z]:")
AUTHOR = {"GIT_AUTHOR_NAME": "msmigrate", "GIT_AUTHOR_EMAIL": "msmigrate@localhost",
          "GIT_COMMITTER_NAME": "msmigrate", "GIT_COMMITTER_EMAIL": "msmigrate@localhost"}
TRAILER = "Msmigrate-Run"


@dataclass
class Target:
    rel: str  # normalised POSIX path relative to the target root
    abs: Path  # resolved absolute path
    additive_only: bool


def _under(rel: str, entry: str, fold: bool = False) -> bool:
    a, b = (rel.lower(), entry.lower()) if fold else (rel, entry)
    return a.startswith(b) if b.endswith("/") else a == b


def _editable_entries(ctx: RunContext) -> list[str]:
    """The run's editable entries, normalised; entries that are absolute, climb, or mean "everything" are dropped."""
    out = []
    for e in ctx.editable_paths:
        is_dir = e.endswith("/")
        n = posixpath.normpath(e.replace("\\", "/"))
        if n in (".", "") or n.startswith(("/", "..")) or "/../" in f"/{n}/":
            continue
        out.append(n + "/" if is_dir else n)
    return out


def check_path(ctx: RunContext, path: str) -> Target | str:
    """A writable target for ``path``, or the reason it is refused."""
    if not isinstance(path, str) or not path.strip():
        return "empty path"
    if "\x00" in path:
        return "path contains a NUL byte"
    if len(path) > MAX_PATH_CHARS or any(len(c) > MAX_COMPONENT_CHARS for c in path.split("/")):
        return f"path is too long (max {MAX_PATH_CHARS} chars, {MAX_COMPONENT_CHARS} per component)"
    if "\\" in path:
        return "backslashes are not allowed in paths; use '/'"
    if path.startswith(("/", "~")) or _DRIVE.match(path):
        return "absolute paths are not allowed; give a path relative to the target root"
    parts = path.split("/")
    if ".." in parts:
        return "'..' components are not allowed"
    if any(p.lower() == ".git" for p in parts):
        return ".git/ is never writable"
    if any(ch.isspace() and ch != " " for ch in path) or any(ord(ch) < 32 for ch in path):
        return "control characters are not allowed in paths"
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs", "Zl", "Zp") for ch in path):
        return "invisible or format characters (zero-width, bidi overrides) are not allowed in paths"
    if unicodedata.normalize("NFKC", path) != path:  # fullwidth '．．', '／', ligatures: look-alikes of real paths
        return "look-alike unicode characters are not allowed in paths; use the plain ASCII spelling"
    rel = posixpath.normpath(path)
    if rel in (".", "") or path.endswith("/"):
        return "path names a directory, not a file"
    if not _SAFE_NAME.match(ctx.model_name or ""):
        return f"run model_name {ctx.model_name!r} is not a safe directory name"
    core = next((c for c in FRAMEWORK_CORE if _under(rel, c, fold=True)), None)
    if core:
        return f"{rel} is framework core ({core}) and must not be changed (reference §11)"
    entries = _editable_entries(ctx)
    entry = next((e for e in entries if _under(rel, e)), None)
    if entry is None:
        folded = next((e for e in entries if _under(rel, e, fold=True)), None)
        if folded:
            return f"{rel} differs only in letter case from editable path {folded}; use the exact spelling"
        return f"{rel} is outside the run's editable paths: {', '.join(entries)}"
    root = Path(ctx.target).resolve()
    try:
        resolved = (root / rel).resolve()
    except OSError as exc:  # a component vanished or changed while it was resolved (a swap race): refuse
        return f"{rel} could not be resolved ({exc.strerror}): a path component changed while it was checked"
    anchor = root / entry.rstrip("/")  # joined textually: a symlinked editable dir must not count as inside
    if entry.endswith("/"):
        if anchor not in resolved.parents:
            return f"{rel} resolves to {resolved}, outside {entry} (symlink escape refused)"
    elif resolved != anchor:
        return f"{rel} resolves to {resolved}, not to {entry} (symlink escape refused)"
    rel_resolved = resolved.relative_to(root).as_posix()
    if any(_under(rel_resolved, c, fold=True) for c in FRAMEWORK_CORE) or ".git" in rel_resolved.lower().split("/"):
        return f"{rel} resolves into protected {rel_resolved}"
    source = Path(ctx.source).resolve()
    if resolved == source or source in resolved.parents:
        return f"{rel} lies inside the source model folder, which is read-only"
    special = safe_fs.special_kind(resolved)
    if special:  # never opened: reading a FIFO would wait for a writer forever (safe_fs re-checks at the open)
        return f"{rel} is a {special}; only regular files can be written"
    if resolved.is_dir():
        return f"{rel} is a directory"
    additive = any(_under(rel, b) for b in BRANCH_B_FILES)
    return Target(rel=rel, abs=resolved, additive_only=additive)


def yaml_duplicate_anchors(text: str) -> list[str]:
    seen, dups = set(), []
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        anchor = getattr(event, "anchor", None)
        if anchor and not isinstance(event, yaml.AliasEvent):
            (dups.append(anchor) if anchor in seen else seen.add(anchor))
    return dups


def validate_content(rel: str, text: str) -> str | None:
    """Why ``text`` may not be written to ``rel``, or None when it is acceptable."""
    if "\x00" in text:
        return "content contains NUL bytes"
    if len(text.encode("utf-8")) > MAX_CONTENT_BYTES:
        return f"content is larger than {MAX_CONTENT_BYTES} bytes"
    if rel.endswith(".py"):
        try:
            ast.parse(text, filename=rel)
        except SyntaxError as exc:
            return f"{rel} would not parse as Python: {exc.msg} at line {exc.lineno}"
    elif rel.endswith((".yaml", ".yml")):
        try:
            dups = yaml_duplicate_anchors(text)
            if dups:  # checked first so the reason names the anchors, not just "duplicate anchor"
                return f"{rel} defines YAML anchor(s) more than once: {', '.join(sorted(set(dups)))}"
            yaml.safe_load(text)
        except yaml.YAMLError as exc:
            return f"{rel} would not load as YAML: {str(exc).splitlines()[0] if str(exc) else exc!r}"
    return None


def base_text(repo: Path, ctx: RunContext, rel: str, current: str) -> str:
    """``rel`` as it was where this run started (the ``<work branch>/base`` tag): the lines the framework owns. The
    current text when the tag is missing (a work tree made before base tags), so nothing is ever less protected."""
    proc = git(repo, "show", f"refs/tags/{ctx.work_branch}/base:{rel}", check=False)
    return proc.stdout if proc.returncode == 0 else current


def additive_violation(old: str, new: str) -> str | None:
    """None when every non-blank line of ``old`` survives unchanged and in order in ``new``; else the first loss."""
    new_lines = new.splitlines()
    i = 0
    for n, line in enumerate(old.splitlines(), 1):
        if not line.strip():
            continue
        while i < len(new_lines) and new_lines[i] != line:
            i += 1
        if i == len(new_lines):
            return f"existing line {n} would be removed or changed: {line.strip()[:160]!r}"
        i += 1
    return None


# ----------------------------------------------------------------------------------------------- git work branch


def _repo(ctx: RunContext) -> Path | None:
    """The run's work tree when it is a git work tree of its own (not a folder inside another repository)."""
    root = Path(ctx.target)
    return root if is_repo(root) else None


def target_commit(ctx: RunContext) -> str | None:
    """The target's HEAD commit (every accepted edit is a commit, so it names the state the gates see)."""
    repo = _repo(ctx)
    return head_commit(repo) if repo is not None else None  # None also for a repository without commits


def changed_since(ctx: RunContext, commit: str, paths: list[str]) -> list[str] | None:
    """Files under ``paths`` that differ between ``commit`` and the target's HEAD; None when git cannot say (no
    repository, an unknown commit): the caller must treat that as "maybe changed"."""
    repo = _repo(ctx)
    if repo is None or not commit or not paths:
        return None
    proc = git(repo, "diff", "--name-only", commit, "HEAD", "--", *paths, check=False)
    if proc.returncode != 0:
        return None
    return [line for line in proc.stdout.splitlines() if line.strip()]


def ensure_work_branch(ctx: RunContext):
    """The run's work tree as a repo, checked out on ``msmigrate/<run_id>``, or the reason there is none.

    Nothing here checks out, creates or resets anything in the user's checkout: the work tree is made by
    ``worktree.attach`` (the runner does it at start); a context still pointing at the user's checkout is refused."""
    if not _SAFE_NAME.match(ctx.run_id or ""):
        return f"run_id {ctx.run_id!r} is not a safe git ref component"
    if ctx.checkout is None or Path(ctx.checkout).resolve() == Path(ctx.target).resolve():
        return "this run has no work tree of its own; edits are refused so the user's checkout stays untouched"
    if not Path(ctx.target).exists():  # released when the run ended (chat /undo afterwards): re-create it
        try:
            attach(ctx)
        except WorktreeError as exc:
            return f"the run's work tree cannot be re-created: {exc}"
    repo = _repo(ctx)
    if repo is None:
        return f"work tree {ctx.target} is not a git repository; edits must be committed"
    if head_commit(repo) is None:
        return f"work tree {ctx.target} has no commits"
    branch = git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False).stdout.strip()
    if branch != ctx.work_branch:
        return f"work tree {ctx.target} is not on {ctx.work_branch}; refusing to edit"
    return repo


def _commit(repo: Path, ctx: RunContext, rel: str, message: str) -> tuple[str, str]:
    git(repo, "add", "-f", "--", rel, env_extra=AUTHOR)
    git(repo, "commit", "--no-verify", "--only", "-m", f"{message}\n\n{TRAILER}: {ctx.run_id}", "--", rel,
        env_extra=AUTHOR)
    sha = git_out(repo, "rev-parse", "HEAD").strip()
    return sha, git_out(repo, "show", "--format=", "--no-color", sha).rstrip("\n")


# ToolNode runs a decision's tool calls in parallel threads; git's index allows one writer at a time.
_GIT_LOCK = threading.RLock()
# a call abandoned at the tool bound (core/tool_result.py) may still hold the lock: the next one says so, not waits
LOCK_WAIT_S = 120.0


def _locked(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not _GIT_LOCK.acquire(timeout=LOCK_WAIT_S):
            return ToolResult.failure(f"another edit of this run still holds the work tree's lock after "
                                      f"{LOCK_WAIT_S:.0f}s (an earlier call that timed out); try again later")
        try:
            return fn(*args, **kwargs)
        finally:
            _GIT_LOCK.release()

    return wrapper


@_locked
def _apply(ctx: RunContext, path: str, make_new, op: str, reason: str) -> ToolResult:
    target = check_path(ctx, path)
    if isinstance(target, str):
        return ToolResult.failure(f"refused: {target}", path=path)
    repo = ensure_work_branch(ctx)
    if isinstance(repo, str):
        return ToolResult.failure(repo, path=path)
    root = Path(ctx.target).resolve()
    try:
        old = safe_fs.read_text(root, target.rel)  # no symlink followed at any component (the check above can race)
    except OSError as exc:  # a symlink or a file where a directory should be (UnsafePath), or it changed under us
        return ToolResult.failure(f"refused: {target.rel}: {exc.strerror or exc}", path=target.rel)
    except UnicodeDecodeError:
        return ToolResult.failure(f"refused: {target.rel} is not UTF-8 text", path=target.rel)
    exists = old is not None
    new = make_new(old)
    if isinstance(new, ToolResult):
        return new
    if old is not None and new == old:
        return ToolResult.failure(f"{target.rel} already has this content; nothing to commit", path=target.rel)
    problem = validate_content(target.rel, new)
    if problem:
        return ToolResult.failure(f"refused: {problem}", path=target.rel)
    if target.additive_only:
        if old is None:
            return ToolResult.failure(f"refused: {target.rel} is a registry file that may only be extended; it "
                                      f"does not exist in this target", path=target.rel)
        loss = additive_violation(base_text(repo, ctx, target.rel, old), new)
        if loss:
            return ToolResult.failure(f"refused: {target.rel} accepts additive edits only (the framework's lines "
                                      f"stay; lines this run added may change); {loss}", path=target.rel)
    try:
        safe_fs.write_text(root, target.rel, new)
    except OSError as exc:  # as above; also a directory in the way, or the tree changed during the write
        return ToolResult.failure(f"refused: cannot write {target.rel}: {exc.strerror or exc}", path=target.rel)
    reason = mask_text(" ".join(reason.split()))  # one line, and no secret ever lands in a commit message
    summary = f"msmigrate: {op} {target.rel}" + (f" ({reason[:120]})" if reason else "")
    try:
        sha, diff = _commit(repo, ctx, target.rel, summary)
    except GitError as exc:  # the file vanished or turned into a link between the write and git add
        return ToolResult.failure(f"refused: {target.rel} changed while it was committed: "
                                  f"{str(exc.stderr or exc).strip()[:300]}", path=target.rel)
    if not exists:  # the model just sent this text: echoing it back as a diff doubles the prompt for nothing
        return ToolResult.success(path=target.rel, commit=sha, branch=ctx.work_branch, created=True,
                                  **new_file_digest(new))
    return ToolResult.success(path=target.rel, commit=sha, branch=ctx.work_branch, created=False, diff=diff)


def last_written_version(root: Path, rel: str) -> tuple[str, str] | None:
    """(short commit, text) of ``rel`` as msmigrate last wrote it on the history of ``root``'s HEAD (a commit whose
    subject is this writer's ``msmigrate: <op> <rel>``); None where no such commit exists or ``root`` is no
    repository. What a gate compares a file changed since with: the change is the one after that commit."""
    if not is_repo(root):
        return None
    proc = git(root, "log", "-20", "--format=%h %s", "--", rel, check=False)
    for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
        sha, _, subject = line.partition(" ")
        if re.match(rf"msmigrate: \w+ {re.escape(rel)}(?: \(|$)", subject):
            shown = git(root, "show", f"{sha}:{rel}", check=False)
            return (sha, shown.stdout) if shown.returncode == 0 else None
    return None


def new_file_digest(text: str, head_lines: int = 5) -> dict[str, object]:
    """What a created file is answered with: its size, hash and first lines (enough to see it landed as meant)."""
    lines = text.splitlines()
    return {"bytes": len(text.encode("utf-8")), "lines": len(lines),
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()[:16], "head": "\n".join(lines[:head_lines])}


def write_file(ctx: RunContext, path: str, content: str, reason: str = "") -> ToolResult:
    """Create or overwrite one file under the run's editable paths, validated and committed."""
    return _apply(ctx, path, lambda old: content, "write", reason)


def edit_file(ctx: RunContext, path: str, old_text: str, new_text: str, replace_all: bool = False,
              reason: str = "") -> ToolResult:
    """Replace ``old_text`` (which must occur exactly once unless ``replace_all``) with ``new_text``."""

    def make_new(old: str | None):
        if old is None:
            return ToolResult.failure(f"{path} does not exist; use write_file to create it", path=path)
        if not old_text:
            return ToolResult.failure("old_text is empty; give the exact text to replace", path=path)
        count = old.count(old_text)
        if count == 0:
            return ToolResult.failure(f"old_text not found in {path}; re-read the file and copy it exactly",
                                      path=path)
        if count > 1 and not replace_all:
            return ToolResult.failure(f"old_text occurs {count} times in {path}; add context or set replace_all",
                                      path=path)
        return old.replace(old_text, new_text)

    return _apply(ctx, path, make_new, "edit", reason)


def _tag_name(ctx: RunContext, phase: str) -> str:
    return f"{ctx.work_branch}/{phase}"


@_locked
def tag_phase(ctx: RunContext, phase: str) -> ToolResult:
    """Mark the work branch's current commit as the end of ``phase`` (moved if the phase is redone)."""
    if not _SAFE_NAME.match(phase or ""):
        return ToolResult.failure(f"phase name {phase!r} is not a safe ref component")
    repo = ensure_work_branch(ctx)
    if isinstance(repo, str):
        return ToolResult.failure(repo)
    name, head = _tag_name(ctx, phase), git_out(repo, "rev-parse", "HEAD").strip()
    git(repo, "tag", "-f", name, head)
    return ToolResult.success(tag=name, commit=head)


def _edit_commits(repo: Path, ctx: RunContext, since: str) -> list[str]:
    return git_out(repo, "rev-list", f"{since}..HEAD").split()


def _run_tags(repo: Path, ctx: RunContext) -> dict[str, str]:
    """This run's tags (``msmigrate/<run_id>/<phase>``) and the commit each names."""
    out = git_out(repo, "for-each-ref", "--format=%(refname) %(objectname) %(*objectname)",
                  f"refs/tags/{ctx.work_branch}/")
    tags = {}
    for line in out.splitlines():
        name, sha, *peeled = line.split()
        tags[name.removeprefix("refs/tags/")] = peeled[0] if peeled else sha  # an annotated tag names its commit through the peeled id
    return tags


@_locked
def rollback(ctx: RunContext, phase_or_commit: str) -> ToolResult:
    """Hard-reset the work branch to a phase tag or to a commit that is already on the work branch."""
    repo = ensure_work_branch(ctx)
    if isinstance(repo, str):
        return ToolResult.failure(repo)
    tags = _run_tags(repo, ctx)
    name = _tag_name(ctx, phase_or_commit)
    if name in tags:
        sha = tags[name]
    else:
        if not re.fullmatch(r"[0-9a-fA-F]{7,40}", phase_or_commit or ""):
            known = sorted(t.split("/")[-1] for t in tags if t.startswith(ctx.work_branch + "/"))
            return ToolResult.failure(f"no phase tag {phase_or_commit!r} for this run (known: {known}) and not a "
                                      f"commit id")
        base = tags.get(_tag_name(ctx, "base"))
        sha = git(repo, "rev-parse", "--verify", "--quiet", f"{phase_or_commit}^{{commit}}", check=False).stdout.strip()
        on_branch = bool(sha) and git(repo, "merge-base", "--is-ancestor", sha, "HEAD", check=False).returncode == 0
        if on_branch and base is not None:
            on_branch = git(repo, "merge-base", "--is-ancestor", base, sha, check=False).returncode == 0
        if not on_branch:
            return ToolResult.failure(f"{phase_or_commit} is not a commit of this run on {ctx.work_branch}")
    undone = _edit_commits(repo, ctx, sha)
    git(repo, "reset", "--hard", sha)
    return ToolResult.success(branch=ctx.work_branch, head=sha, commits_undone=undone)


@_locked
def undo_last(ctx: RunContext) -> ToolResult:
    """Drop the last accepted edit (the work branch's head, if it is an msmigrate edit of this run)."""
    repo = ensure_work_branch(ctx)
    if isinstance(repo, str):
        return ToolResult.failure(repo)
    sha, parents, summary, message = git_out(repo, "log", "-1", "--format=%H%x00%P%x00%s%x00%B", "HEAD").split(
        "\x00", 3)
    parents = parents.split()
    if f"{TRAILER}: {ctx.run_id}" not in message or not parents:
        return ToolResult.failure(f"nothing to undo: the head of {ctx.work_branch} is not an edit of this run")
    git(repo, "reset", "--hard", parents[0])
    return ToolResult.success(undone=sha, summary=summary, head=parents[0])


# ----------------------------------------------------------------------------------------------- LangChain tools


class WriteFileArgs(BaseModel):
    path: str = Field(..., description="File path relative to the target root, inside the run's editable paths "
                                       "(e.g. mindspeed_mm/fsdp/models/<name>/modeling_<name>.py).")
    content: str = Field(..., description="The whole file.")
    reason: str = Field("", description="One line saying why; recorded in the commit message.")


class EditFileArgs(BaseModel):
    path: str = Field(..., description="Existing file relative to the target root, inside the editable paths.")
    old_text: str = Field(..., description="Exact text to replace, copied from the file (must be unique unless "
                                           "replace_all).")
    new_text: str = Field(..., description="Replacement text.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of requiring exactly one.")
    reason: str = Field("", description="One line saying why; recorded in the commit message.")


class RollbackArgs(BaseModel):
    phase_or_commit: str = Field(..., description="A phase name tagged earlier in this run (e.g. 'model') or a "
                                                  "commit id on the run's work branch.")


class NoArgs(BaseModel):
    pass


def file_writer_tools(ctx: RunContext) -> list:
    """Write/edit/rollback/undo tools bound to one run, for a policy to bind."""
    return [
        make_tool("write_file", "Create or overwrite a file inside the run's editable paths; validated (Python "
                                "parses, YAML loads) and committed; returns the diff (a new file: size, hash, first lines).", WriteFileArgs,
                  lambda path, content, reason="": write_file(ctx, path, content, reason)),
        make_tool("edit_file", "Search/replace edit of an existing editable file; registry files accept additive "
                               "edits only; validated and committed; returns the diff.", EditFileArgs,
                  lambda path, old_text, new_text, replace_all=False, reason="":
                  edit_file(ctx, path, old_text, new_text, replace_all, reason)),
        make_tool("rollback", "Hard-reset the run's work branch to a phase tag or an earlier commit of this run.",
                  RollbackArgs, lambda phase_or_commit: rollback(ctx, phase_or_commit)),
        make_tool("undo_last_edit", "Revert the most recent accepted edit of this run.", NoArgs,
                  lambda: undo_last(ctx)),
    ]
