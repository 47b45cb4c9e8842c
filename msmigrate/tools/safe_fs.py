"""Reads and writes under a root that never follow a symlink at any path component.

``file_writer`` checks a path (resolved) before writing, but a check and a later ``open`` by path leave a window:
code running at the same time (a probe, a launch the model wrote) can swap a checked directory for a symlink. Here
every component is opened with ``O_NOFOLLOW`` relative to the previous directory's fd, starting at the root's fd, so
the file actually written is the one under the root — whatever the tree looks like by then. A symlink anywhere in the
path makes the call fail (``ELOOP``/``ENOTDIR``), which ``file_writer`` reports as a refusal.

Only regular files and directories are ever opened. A FIFO, socket or device at a path (code that ran in the work
tree — the source's own remote code runs there before approval — can plant one) is refused before it is opened: the
name is ``lstat``-ed relative to its directory fd, and every open also carries ``O_NONBLOCK`` and is checked with
``fstat``, so even a swap between the check and the open cannot make a read wait on a FIFO writer that never comes
(the writer holds the git lock while it reads).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

# O_NONBLOCK: opening a FIFO without it waits for the other end; with O_DIRECTORY a non-directory fails anyway
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_FILE_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class UnsafePath(OSError):
    """A component is a symlink, a file where a directory is needed, or otherwise not a plain directory/file."""


def kind_of(mode: int) -> str:
    """What a file mode is, in words (for refusals)."""
    for test, name in ((stat.S_ISREG, "regular file"), (stat.S_ISDIR, "directory"), (stat.S_ISLNK, "symlink"),
                       (stat.S_ISFIFO, "FIFO (named pipe)"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"


def special_kind(path: Path) -> str | None:
    """The kind of ``path`` when it exists and is neither a regular file, a directory nor a symlink (never opened:
    ``lstat`` only); None otherwise."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode) else kind_of(mode)


def _refuse_special(dfd: int, name: str, rel: str) -> bool:
    """True when ``name`` exists in ``dfd`` as a regular file; False when it does not exist; raises ``UnsafePath``
    for anything else (a symlink, a FIFO, a socket, a device, a directory)."""
    try:
        mode = os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISREG(mode):
        return True
    raise UnsafePath(errno.EINVAL, f"{rel} is a {kind_of(mode)}, not a regular file")


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
            if not _refuse_special(dfd, name, rel):
                return None
            try:
                fd = os.open(name, _FILE_READ_FLAGS, dir_fd=dfd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise UnsafePath(exc.errno, f"{rel} is a symlink") from None
                raise
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):  # swapped between the lstat and the open
                os.close(fd)
                raise UnsafePath(errno.EINVAL, f"{rel} is a {kind_of(mode)}, not a regular file")
            with os.fdopen(fd, "r", encoding="utf-8") as fh:
                return fh.read()
    except FileNotFoundError:
        return None


def write_text(root: Path, rel: str, text: str) -> None:
    """Write ``text`` to ``root/rel`` atomically (temp file + rename inside the same directory fd)."""
    data = text.encode("utf-8")
    with open_parent(root, rel, create=True) as (dfd, name):
        _refuse_special(dfd, name, rel)  # a FIFO/socket/device (or a directory) in the way is not replaced
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
