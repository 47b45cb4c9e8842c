"""Reads and writes under a root that never follow a symlink at any path component.

``file_writer`` checks a path (resolved) before writing, but a check and a later ``open`` by path leave a window:
code running at the same time (a probe, a launch the model wrote) can swap a checked directory for a symlink. Here
every component is opened with ``O_NOFOLLOW`` relative to the previous directory's fd, starting at the root's fd, so
the file actually written is the one under the root — whatever the tree looks like by then. A symlink anywhere in the
path makes the call fail (``ELOOP``/``ENOTDIR``), which ``file_writer`` reports as a refusal.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(OSError):
    """A component is a symlink, a file where a directory is needed, or otherwise not a plain directory/file."""


def _components(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        raise UnsafePath(errno.EINVAL, f"not a plain relative path: {rel!r}")
    return parts


@contextlib.contextmanager
def open_parent(root: Path, rel: str, *, create: bool):
    """Yield (fd of the parent directory of ``rel``, final name), walking from ``root`` without following links."""
    parts = _components(rel)
    fd = os.open(str(root), _DIR_FLAGS)
    try:
        for i, part in enumerate(parts[:-1]):
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o755, dir_fd=fd)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    where = "/".join(parts[: i + 1])
                    raise UnsafePath(exc.errno, f"{where} is a symlink or not a directory") from None
                raise
            os.close(fd)
            fd = nxt
        yield fd, parts[-1]
    finally:
        os.close(fd)


def read_text(root: Path, rel: str) -> str | None:
    """The file's text, or None when it does not exist. A symlink at any component raises ``UnsafePath``."""
    try:
        with open_parent(root, rel, create=False) as (dfd, name):
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise UnsafePath(exc.errno, f"{rel} is a symlink") from None
                raise
            with os.fdopen(fd, "r", encoding="utf-8") as fh:
                return fh.read()
    except FileNotFoundError:
        return None


def write_text(root: Path, rel: str, text: str) -> None:
    """Write ``text`` to ``root/rel`` atomically (temp file + rename inside the same directory fd)."""
    data = text.encode("utf-8")
    with open_parent(root, rel, create=True) as (dfd, name):
        tmp = f".{name}.{secrets.token_hex(4)}.msmigrate-tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)  # replaces a symlink itself, never its target
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
