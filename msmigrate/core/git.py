"""The one way msmigrate runs git (every layer: tools, agent, faces, launcher, validator, test beds).

git runs programs the repository's configuration chooses: hooks (``post-commit``, ``post-checkout``,
``reference-transaction`` … — git-lfs and the pre-commit framework install them in real checkouts), a
``core.fsmonitor`` command, a pager, credential helpers, external diff and textconv drivers, ``gpg`` for signed
commits. msmigrate needs none of them, and the target's configuration is not ours to run with the agent's
environment. So every call here:

- gets a small allow-listed environment (what finds git, its user config and the locale — no API key, no cloud
  credential, no ``GIT_DIR``/``GIT_CONFIG_*`` redirection from the agent's environment), plus
  ``GIT_TERMINAL_PROMPT=0``, ``GIT_CONFIG_NOSYSTEM=1``, no pager, no editor, ``GIT_OPTIONAL_LOCKS=0`` (a read never
  takes the index lock a writer may need);
- turns hooks and fsmonitor off and resets credential helpers on the command line (``-c`` outranks every config
  file), disallows every transport but local paths (``protocol.allow=never``, ``protocol.file.allow=always``), turns
  off commit/tag signing and automatic gc/maintenance (a background ``gc`` would outlive the call);
- reads diffs without external diff or textconv drivers (``--no-ext-diff --no-textconv`` on ``diff``/``show``/
  ``log``);
- has a wall-clock bound and never reads stdin.

Content filters (``filter.<driver>.clean``/``smudge``, e.g. git-lfs) still run on ``add`` and ``reset --hard``:
turning them off would commit a different blob than the user's own git would. They get the same scrubbed environment.

GitPython is not used for this: it starts git with a copy of the agent's whole ``os.environ`` (``Git.execute``) and
keeps long-lived ``cat-file`` children, so it cannot give these guarantees. ``tests/security/test_git_calls.py``
fails when a module runs git another way.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Mapping

# What git itself needs from the agent's environment: where the git binary is, HOME for the user's ~/.gitconfig
# (identity, safe.directory), the locale for its messages, a temp dir. Everything else is dropped.
ENV_NAMES = frozenset({"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR"})
ENV_PREFIXES = ("LC_",)
FIXED_ENV = {
    "GIT_TERMINAL_PROMPT": "0",  # never ask for a password on a terminal
    "GIT_CONFIG_NOSYSTEM": "1",  # /etc/gitconfig is not read
    "GIT_PAGER": "cat", "PAGER": "cat",
    "GIT_EDITOR": ":",  # nothing msmigrate runs opens an editor; if one would, it exits at once
    "GIT_OPTIONAL_LOCKS": "0",
}
# -c settings on every call (command-line config outranks the repository's, the user's and the system's)
SAFE_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "credential.helper=",
    "protocol.allow=never",
    "protocol.file.allow=always",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "gc.auto=0",
    "maintenance.auto=false",
)
# subcommands that may print a diff: no external diff program, no textconv driver
DIFF_SUBCOMMANDS = frozenset({"diff", "show", "log"})
TIMEOUT_S = 300.0


class GitError(RuntimeError):
    """A git command failed (non-zero exit, timeout, git missing); the message names the command and its stderr."""

    def __init__(self, message: str, *, returncode: int | None = None, stderr: str = ""):
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


def git_env(extra: Mapping[str, str] | None = None, *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every git child: the allow-listed names of ``base`` (default ``os.environ``), the fixed
    settings above, and ``extra`` (msmigrate's own, e.g. the commit author)."""
    src = os.environ if base is None else base
    env = {k: v for k, v in src.items() if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}
    env.update(FIXED_ENV)
    env.update({str(k): str(v) for k, v in (extra or {}).items()})
    return env


def git_argv(cwd: Path | str | None, *args: str) -> list[str]:
    """The full command line for ``git <args>`` run in ``cwd`` (None: no ``-C``, e.g. ``clone``)."""
    argv = ["git", "--no-pager"]
    for setting in SAFE_CONFIG:
        argv += ["-c", setting]
    if cwd is not None:
        argv += ["-C", str(cwd)]
    args = list(args)
    if args and args[0] in DIFF_SUBCOMMANDS:
        args = [args[0], "--no-ext-diff", "--no-textconv", *args[1:]]
    return argv + args


def git(cwd: Path | str | None, *args: str, check: bool = True, env_extra: Mapping[str, str] | None = None,
        timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    """Run ``git <args>`` in ``cwd`` the safe way (module docstring). ``check``: raise ``GitError`` on a non-zero
    exit. A timeout or a missing git binary always raises ``GitError``."""
    argv = git_argv(cwd, *args)
    shown = " ".join(args)[:200]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, errors="replace", stdin=subprocess.DEVNULL,
                              env=git_env(env_extra), timeout=timeout)
    except subprocess.TimeoutExpired:
        raise GitError(f"git {shown} did not finish within {timeout:.0f}s in {cwd}") from None
    except OSError as exc:
        raise GitError(f"git {shown} could not start in {cwd}: {exc.strerror or exc}") from None
    if check and proc.returncode != 0:
        raise GitError(f"git {shown} failed in {cwd}: {proc.stderr.strip()[:500]}", returncode=proc.returncode,
                       stderr=proc.stderr)
    return proc


def git_out(cwd: Path | str | None, *args: str, **kwargs) -> str:
    """stdout of a checked ``git`` call."""
    return git(cwd, *args, check=True, **kwargs).stdout


def is_repo(path: Path | str) -> bool:
    """``path`` is the top of a git work tree (its own, not a folder inside a parent repository)."""
    path = Path(path)
    if not path.is_dir():
        return False
    proc = git(path, "rev-parse", "--show-toplevel", check=False)
    return proc.returncode == 0 and Path(proc.stdout.strip()).resolve() == path.resolve()


def head_commit(path: Path | str) -> str | None:
    """The commit HEAD names in ``path``, or None (not a repository, no commit yet)."""
    proc = git(path, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def branch_exists(path: Path | str, branch: str) -> bool:
    """``refs/heads/<branch>`` exists in the repository of ``path`` (False when ``path`` is no repository)."""
    return git(path, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False).returncode == 0


def is_dirty(path: Path | str) -> bool:
    """Tracked files differ from HEAD (index or work tree); untracked files do not count."""
    return bool(git_out(path, "status", "--porcelain", "--untracked-files=no").strip())
