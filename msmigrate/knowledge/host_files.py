"""A file the run reads that the host, not a setting, keeps from being read — decided from the error and the file
itself (the run's context: ``failure_context.context_owner``).

A setting that names a wrong path fails with "No such file or directory" on a path that is not there; the fix is the
setting. Other failures name a file the setting got right: the operating system refused the operation itself (a mount
without ``mmap`` — ENODEV —, a disk error, a stale network handle, a link loop), the path is a symbolic link whose
target is gone (a Hugging Face cache snapshot copied without its blobs), or the file is there but cut short (a copy
interrupted: its header promises more bytes than it holds). No artifact of the migration changes for those: the fix
is the host's copy of the files or its file system.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

# Rust's io::Error (safetensors, tokenizers) and Python's OSError, with the errno
_OS_ERROR = re.compile(r"\(os error (?P<rust>\d+)\)|\[Errno (?P<py>\d+)\]")
# errnos a correct path still meets: the file system or device refuses the operation
_HOST_ERRNOS = frozenset({errno.ENODEV, errno.EIO, errno.ESTALE, errno.ENOTCONN, errno.ELOOP, errno.ENXIO})
_PATH = re.compile(r"(?P<path>/[^\s'\"():,]+)")
# a safetensors file shorter than its own header says (an interrupted copy)
_CUT_SHORT = re.compile(r"incomplete metadata|file not fully covered|MetadataIncompleteBuffer")


def _dangling(path: str) -> str | None:
    p = Path(path)
    try:
        if p.is_symlink() and not p.exists():
            return os.readlink(p)
    except OSError:
        return None
    return None


def host_file_error(text: str) -> str | None:
    """Why the host keeps a file the run reads from being read (one sentence with the fix), or None."""
    for m in _OS_ERROR.finditer(text):
        code = int(m.group("rust") or m.group("py"))
        name, reason = errno.errorcode.get(code, str(code)), os.strerror(code)
        if code in _HOST_ERRNOS:
            return (f"the operating system refused the file operation itself ({name}: `{reason}`), on a path the "
                    f"run's settings name correctly: the file system the files live on (a FUSE or network mount "
                    f"without mmap, a failing disk, a stale handle) — copy the files to a local disk or fix the "
                    f"mount; no migration artifact changes")
        if code == errno.ENOENT:
            near = text[m.start():m.end() + 400]
            for p in _PATH.finditer(near):
                target = _dangling(p.group("path"))
                if target is not None:
                    return (f"{p.group('path')} is a symbolic link to {target}, which does not exist (a model "
                            f"cache copied without the blobs its links point to): copy the folder with its links "
                            f"followed (`cp -rL`, `rsync -L`) or download the files again; no migration artifact "
                            f"changes")
    if _CUT_SHORT.search(text):
        return ("a weights file is shorter than its own header says (a copy cut short): copy it again from the "
                "original and compare the sizes; no migration artifact changes")
    return None
