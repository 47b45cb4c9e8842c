"""Pure-``re`` re-implementation of the target's ``module_name_match(pattern, name)`` (contract §5.1).

The target (``mindspeed/fsdp/utils/str_match.py``) decides which ``named_modules()`` entries a YAML pattern in
``apply_modules`` / ``recompute_plan`` / ``freeze`` / ``hook_modules`` selects. The agent must predict that choice
*without* importing the target, so the semantics are reproduced here:

- the whole name must match (anchored at both ends, no prefix semantics: ``model.visual`` matches only itself);
- ``{*}``   — one run of decimal digits (``blocks.{*}`` matches ``blocks.12``, not ``blocks`` nor ``blocks.0.attn``);
- ``{a-b}`` — one run of digits whose integer value lies in ``[a, b]`` (inclusive);
- ``*``     — any characters, dots included (``*`` alone matches every name, the root ``""`` too);
- ``?``     — exactly one character (any, dot included);
- ``.`` and every other character — literal.

Brace content other than ``*`` or ``a-b`` raises ``ValueError`` with the target's wording
(``Unrecognized brace pattern: x``, ``Invalid brace pattern: x``, ``Non-integer in range: x``,
``Invalid range: x (low > high)``), so the validator can quote the error the real run would hit.
An unclosed ``{`` has no special meaning and is matched literally, as in the target.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

_BRACE = re.compile(r"\{([^}]*)\}")


@dataclass(frozen=True)
class CompiledPattern:
    """A pattern turned into an anchored regex plus, per digit group, an optional inclusive range."""

    pattern: str
    regex: re.Pattern[str]
    ranges: tuple[tuple[int, int] | None, ...]

    def matches(self, name: str) -> bool:
        m = self.regex.fullmatch(name)
        if m is None:
            return False
        for digits, bounds in zip(m.groups(), self.ranges):
            if bounds is not None and not bounds[0] <= int(digits) <= bounds[1]:
                return False
        return True


def _parse_brace(inner: str) -> tuple[int, int] | None:
    """``*`` → None (any digits); ``a-b`` → (a, b). Messages mirror the target's ValueErrors."""
    if inner == "*":
        return None
    if "-" not in inner:
        raise ValueError(f"Unrecognized brace pattern: {inner}")
    parts = inner.split("-")
    if len(parts) != 2:
        raise ValueError(f"Invalid brace pattern: {inner}")
    try:
        low, high = int(parts[0]), int(parts[1])
    except ValueError as exc:
        raise ValueError(f"Non-integer in range: {inner}") from exc
    if low > high:
        raise ValueError(f"Invalid range: {inner} (low > high)")
    return (low, high)


def _glob_to_regex(text: str) -> str:
    """Translate the wildcard characters of a brace-free piece of a pattern."""
    out = []
    for ch in text:
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return "".join(out)


@lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> CompiledPattern:
    """Compile once; patterns are re-used across thousands of module names. Raises ValueError on bad braces."""
    pieces: list[str] = []
    ranges: list[tuple[int, int] | None] = []
    pos = 0
    for m in _BRACE.finditer(pattern):
        pieces.append(_glob_to_regex(pattern[pos : m.start()]))
        ranges.append(_parse_brace(m.group(1)))
        pieces.append(r"(\d+)")
        pos = m.end()
    pieces.append(_glob_to_regex(pattern[pos:]))
    # DOTALL so that `*`/`?` behave the same for any character a module name could contain.
    return CompiledPattern(pattern, re.compile("".join(pieces), re.DOTALL), tuple(ranges))


def module_name_match(pattern: str, name: str) -> bool:
    """True when ``name`` (a full dotted ``named_modules()`` path) is selected by ``pattern``."""
    return compile_pattern(pattern).matches(name)


def match_any(patterns: Iterable[str], name: str) -> bool:
    return any(module_name_match(p, name) for p in patterns)


def matching_names(pattern: str, names: Iterable[str]) -> list[str]:
    """All names selected by one pattern, in the given order."""
    compiled = compile_pattern(pattern)
    return [n for n in names if compiled.matches(n)]
