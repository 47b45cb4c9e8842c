"""Shorten a line for a table cell or a progress line without lying about it: cut at a word boundary, so a number
(``6.254289``), a path or an identifier is shown whole or not at all — never as ``6.25`` — and the cut is marked."""

from __future__ import annotations

import re

MARK = "…"
_TOKEN_TAIL = re.compile(r"\S+$")


def clip(text: object, limit: int) -> str:
    """``text`` in at most ``limit`` characters; when cut, at the last whitespace before the limit, ending in ``…``.
    A single token longer than the limit (a long path) is cut inside, marked the same way."""
    text = str(text)
    if len(text) <= limit:
        return text
    room = max(1, limit - len(MARK))
    cut = text[:room]
    if not text[room].isspace():  # the limit falls inside a token: drop that token's head
        shorter = _TOKEN_TAIL.sub("", cut)
        cut = shorter if shorter.strip() else cut
    return cut.rstrip(" \t\n,;:") + MARK
