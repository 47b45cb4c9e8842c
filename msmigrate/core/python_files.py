"""Python source files read as syntax trees, the one way the static readers do it: a file that does not parse is
skipped (a reader of a target's or a plugin's code reports what it found, not the author's syntax error)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterable, Iterator


def parsed_files(paths: Iterable[Path]) -> Iterator[tuple[Path, ast.AST]]:
    """(path, tree) for each existing file of ``paths`` that parses, in the given order."""
    for path in paths:
        if not path.is_file():
            continue
        try:
            yield path, ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue


def folder_modules(folder: Path) -> Iterator[tuple[Path, ast.AST]]:
    """``parsed_files`` of the ``*.py`` files directly in ``folder``, sorted (none when it is no folder)."""
    return parsed_files(sorted(folder.glob("*.py")) if folder.is_dir() else [])
