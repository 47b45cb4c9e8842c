"""Bounded, gitignore-aware views of a source or target tree: a file tree, a file's lines, a regex grep.

Every output is bounded (entries, lines, characters, hits) and says how much was cut, so one call cannot flood the
policy's prompt. Paths are always relative to the root they were read from; nothing escapes the root.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from msmigrate.core.git import git_out, is_repo
from msmigrate.core.tool_result import ToolResult

# Directories never worth showing when the root is not a git repo (or for untracked noise inside one).
SKIP_DIRS = frozenset(
    {".git", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache",
     ".idea", ".vscode", "build", "dist", ".eggs", ".tox", "cache_dir", "logs", "ckpt"}
)
SKIP_SUFFIXES = (".pyc", ".pyo", ".so", ".o")
# Weights and media are listed (their presence matters) but never read or grepped.
BINARY_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".npy", ".npz", ".png", ".jpg", ".jpeg", ".gif",
                   ".mp4", ".wav", ".mp3", ".tar", ".gz", ".zip", ".onnx", ".msgpack", ".h5", ".model")


def resolve_inside(root: Path, rel: str) -> Path | None:
    """``root/rel`` resolved, or None when it escapes ``root`` (``..``, absolute paths, symlinks out)."""
    if "\x00" in rel:
        return None
    root_r = root.resolve()
    cand = (root_r / rel).resolve()
    if cand != root_r and root_r not in cand.parents:
        return None
    return cand


def list_files(root: Path) -> list[str]:
    """All files under root as sorted relative POSIX paths; git's view (tracked + untracked, not ignored) when root is a
    git work tree, else a walk with a skip-list."""
    root = root.resolve()
    listed = _git_listed(root)
    if listed is not None:
        return listed
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        for fn in filenames:
            if not fn.endswith(SKIP_SUFFIXES):
                out.append(Path(dirpath, fn).relative_to(root).as_posix())
    return sorted(out)


def _git_listed(root: Path) -> list[str] | None:
    if not is_repo(root):
        return None
    text = git_out(root, "ls-files", "-co", "--exclude-standard", "-z")
    names = {n for n in text.split("\x00") if n}
    # ls-files lists deleted-but-tracked files too; show only what exists.
    return sorted(n for n in names if (root / n).is_file() and not n.endswith(SKIP_SUFFIXES))


def tree(root: Path, subdir: str = "", max_depth: int = 4, max_entries: int = 300) -> ToolResult:
    """Indented tree of ``root/subdir`` down to ``max_depth`` levels; deeper content is summarised as file counts."""
    base = resolve_inside(root, subdir or ".")
    if base is None:
        return ToolResult.failure(f"path {subdir!r} is outside the root")
    if not base.is_dir():
        return ToolResult.failure(f"{subdir!r} is not a directory under {root}")
    prefix = base.relative_to(root.resolve()).as_posix()
    prefix = "" if prefix == "." else prefix + "/"
    files = [f[len(prefix):] for f in list_files(root) if f.startswith(prefix)]
    lines: list[str] = []
    seen_dirs: set[str] = set()
    collapsed: dict[str, int] = {}
    for f in files:
        parts = f.split("/")
        for depth in range(1, min(len(parts), max_depth + 1)):
            d = "/".join(parts[:depth])
            if d not in seen_dirs:
                seen_dirs.add(d)
                lines.append("  " * (depth - 1) + parts[depth - 1] + "/")
        if len(parts) <= max_depth:
            lines.append("  " * (len(parts) - 1) + parts[-1])
        else:
            key = "/".join(parts[:max_depth])
            collapsed[key] = collapsed.get(key, 0) + 1
    total = len(lines)
    cut = max(0, total - max_entries)
    return ToolResult.success(
        root=str(root), subdir=subdir, files_total=len(files), tree="\n".join(lines[:max_entries]),
        entries_cut=cut, deeper_file_counts=dict(sorted(collapsed.items())[:100]),
    )


def read_lines(root: Path, path: str, start: int = 1, end: int | None = None, max_lines: int = 400,
               max_chars: int = 20000) -> ToolResult:
    """Lines ``start..end`` (1-based, inclusive) of one file; longer spans keep head and tail and report the cut."""
    p = resolve_inside(root, path)
    if p is None:
        return ToolResult.failure(f"path {path!r} is outside the root")
    if not p.is_file():
        return ToolResult.failure(f"no file {path!r} under {root}")
    if p.name.endswith(BINARY_SUFFIXES):
        return ToolResult.failure(f"{path!r} is a binary/weights file; only its size is available",
                                  size_bytes=p.stat().st_size)
    all_lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
    n = len(all_lines)
    if n == 0:  # an empty file (a package's __init__.py) is an answer, not a failed read (live run 5 read one)
        return ToolResult.success(path=path, start=1, end=0, total_lines=0, text="", lines_cut=0, chars_cut=0,
                                  note="empty file")
    start = max(1, start)
    end = n if end is None else min(end, n)
    if start > max(n, 1) or end < start:
        return ToolResult.failure(f"line range {start}..{end} is empty; file has {n} lines", total_lines=n)
    numbered = [f"{i}: {all_lines[i - 1]}" for i in range(start, end + 1)]
    lines_cut = 0
    if len(numbered) > max_lines:
        head, tail = numbered[: max_lines * 3 // 4], numbered[-(max_lines // 4):]
        lines_cut = len(numbered) - len(head) - len(tail)
        # the cut names the range that shows it (live run 8 spent a request re-reading a whole file for its middle)
        first_cut = start + len(head)
        numbered = head + [f"… [{lines_cut} lines cut: read start={first_cut} end={first_cut + lines_cut - 1} for "
                           f"them] …"] + tail
    text = "\n".join(numbered)
    chars_cut = 0
    if len(text) > max_chars:
        chars_cut = len(text) - max_chars
        text = text[: max_chars * 3 // 4] + f"\n… [{chars_cut} chars cut] …\n" + text[-max_chars // 4:]
    return ToolResult.success(path=path, start=start, end=end, total_lines=n, text=text, lines_cut=lines_cut,
                              chars_cut=chars_cut)


def grep(root: Path, pattern: str, subdir: str = "", glob: str = "", max_hits: int = 80,
         ignore_case: bool = False) -> ToolResult:
    """Regex search over text files; returns ``path:line: text`` hits, bounded, with the total count."""
    try:
        rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        return ToolResult.failure(f"invalid regex {pattern!r}: {exc}")
    base = resolve_inside(root, subdir or ".")
    if base is None:
        return ToolResult.failure(f"path {subdir!r} is outside the root")
    prefix = base.relative_to(root.resolve()).as_posix()
    prefix = "" if prefix == "." else prefix.rstrip("/") + "/"
    hits: list[str] = []
    total = 0
    for rel in list_files(root):
        if not rel.startswith(prefix) or rel.endswith(BINARY_SUFFIXES):
            continue
        if glob and not Path(rel).match(glob):
            continue
        fp = root / rel
        try:
            if not fp.is_file() or fp.stat().st_size > 5_000_000:  # a FIFO or device would block or never end
                continue
            text = fp.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for i, line in enumerate(text.splitlines(), 1):
            if rx.search(line):
                total += 1
                if len(hits) < max_hits:
                    hits.append(f"{rel}:{i}: {line.strip()[:240]}")
    return ToolResult.success(pattern=pattern, hits=hits, total_hits=total, hits_cut=max(0, total - len(hits)))
