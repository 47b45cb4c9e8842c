"""Module-name pattern matching used by every *plan* (fsdp/recompute/freeze)."""
import re
from functools import lru_cache

_TOKEN = re.compile(r"\{[^}]*\}|\*|\?|.", re.S)


@lru_cache(maxsize=1024)
def _compile(pattern):
    """Return (regex, ranges): `{*}` = digit run, `{a-b}` = digit run within a..b, `*` = anything, `?` = one char."""
    parts, ranges = [], []
    for tok in _TOKEN.findall(pattern):
        if tok.startswith("{") and len(tok) > 1:
            body = tok[1:-1]
            if body == "*":
                parts.append(r"(\d+)")
                ranges.append(None)
            elif re.fullmatch(r"\d+-\d+", body):
                lo, hi = body.split("-")
                parts.append(r"(\d+)")
                ranges.append((int(lo), int(hi)))
            else:
                raise ValueError(f"Unrecognized brace pattern: {body}")
        elif tok == "*":
            parts.append(".*")
        elif tok == "?":
            parts.append(".")
        else:
            parts.append(re.escape(tok))
    return re.compile("^" + "".join(parts) + "$"), tuple(ranges)


def module_name_match(pattern: str, string: str) -> bool:
    """True when the full dotted module name `string` matches `pattern` (anchored, no prefix semantics)."""
    regex, ranges = _compile(pattern)
    m = regex.match(string)
    if m is None:
        return False
    for value, bounds in zip(m.groups(), ranges):
        if bounds is not None and not bounds[0] <= int(value) <= bounds[1]:
            return False
    return True
