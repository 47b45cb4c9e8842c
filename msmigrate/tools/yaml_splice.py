"""Write an edited round-trip document as its source text with only the edited entries rewritten.

ruamel.yaml's emitter writes one indentation per document, lower-case booleans, normalised flow sequences and
spacing, and drops a comment that follows an alias; the framework's examples use several indentations in one file,
``True``, ``[0,1,2,3]``, ``lr:  1.0e-5``. Re-emitting the whole document would rewrite all of that. Instead the
source text is edited in place: the text is parsed, the first entry whose value differs from the edited document is
rewritten (a scalar in its own span, anchor, quotes and inline comment kept; a block value under its key line; a
removed entry's lines dropped; a new key after its section's last entry), and the loop repeats until the text parses
to exactly the document. Aliases and merge keys need no special case: after an anchored value is rewritten, every
alias of it parses to the new value and no longer differs.

``splice`` returns None where an edit cannot be placed in the text (a key that shares its line with a list dash, a
multi-line plain scalar); the caller then emits the whole document."""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import ReusedAnchorWarning
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

Renderer = Callable[[Any], str]  # a one-key mapping -> its YAML text (block style, no indentation)


@dataclass
class _Edit:
    start: int  # line index, inclusive
    end: int  # line index, exclusive
    lines: list[str]  # replacement lines, each ending in "\n"


class _Unplaceable(Exception):
    """An edit this text editor cannot place; the caller emits the whole document instead."""


def parse(text: str) -> Any:
    y = YAML()
    y.preserve_quotes = True
    with warnings.catch_warnings():
        # a few framework examples define one anchor twice (the later one wins, as in every YAML loader)
        warnings.simplefilter("ignore", ReusedAnchorWarning)
        return y.load(text)


def same(a: Any, b: Any) -> bool:
    """Equal values of equal kinds (``1``, ``1.0`` and ``True`` differ), mappings compared with their merged keys."""
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b)
                and all(same(a[k], b[k]) for k in a))
    if isinstance(a, list) or isinstance(b, list):
        return (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
                and all(same(x, y) for x, y in zip(a, b)))
    return _kind(a) == _kind(b) and a == b


def _kind(value: Any) -> str:
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind.__name__
    return "null" if value is None else type(value).__name__


def splice(source: str, doc: Any, render: Renderer, max_edits: int = 500) -> str | None:
    """``source`` edited until it parses to ``doc`` (None where an edit cannot be placed in the text)."""
    text = source
    for _ in range(max_edits):
        parsed = parse(text)
        if not isinstance(parsed, CommentedMap):
            return None
        lines = text.splitlines(keepends=True)
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"  # an edit after the last line needs its line ended
        try:
            edit = _map_edit(parsed, doc, lines, render)
        except _Unplaceable:
            return None
        if edit is None:
            return text if same(parsed, doc) else None
        lines[edit.start:edit.end] = edit.lines
        text = "".join(lines)
    return None


def _own(mapping: Any) -> list[Any]:
    """A mapping's own keys (not those a ``<<`` merge brings in)."""
    if isinstance(mapping, CommentedMap):
        return [k for k, _ in mapping.non_merged_items()]
    return list(mapping)


def _map_edit(node: CommentedMap, want: Any, lines: list[str], render: Renderer) -> _Edit | None:
    """The first edit (in document order) that brings ``node``'s text closer to ``want``."""
    own, wanted = _own(node), _own(want)
    for key in own:
        if key not in wanted:
            return _delete(node, key, lines)
        edit = _value_edit(node, key, want[key], lines, render)
        if edit is not None:
            return edit
    # a key the document wants that the text lacks, or has only through a ``<<`` merge with another value (a merged
    # value does not follow later edits of its anchor in ruamel's document): written as the mapping's own key
    missing = [k for k in want if k not in own and (k not in node or not same(node[k], want[k]))]
    if any(k not in want for k in node if k not in own):
        raise _Unplaceable("a merged key the document no longer has")
    if missing:
        return _insert(node, own, missing[0], want[missing[0]], lines, render)
    return None


def _value_edit(node: CommentedMap, key: Any, want: Any, lines: list[str], render: Renderer) -> _Edit | None:
    have = node[key]
    if same(have, want):
        return None
    line, col = node.lc.key(key)
    block = not _inline_text(lines[line], col)
    if block and isinstance(have, CommentedMap) and isinstance(want, dict) and not _flow(have):
        return _map_edit(have, want, lines, render)
    if block and isinstance(have, CommentedSeq) and isinstance(want, list) and len(have) == len(want):
        for i, (item, wanted) in enumerate(zip(have, want)):
            if isinstance(item, CommentedMap) and isinstance(wanted, dict) and not same(item, wanted):
                if _flow(item):
                    break
                edit = _map_edit(item, wanted, lines, render)
                if edit is not None:
                    return edit
            elif not same(item, wanted):
                break
        else:
            return None
    return _replace(node, key, want, lines, render)


def _flow(node: Any) -> bool:
    return bool(node.fa.flow_style()) if hasattr(node, "fa") else False


def _key_line(node: CommentedMap, key: Any, lines: list[str]) -> tuple[int, int]:
    line, col = node.lc.key(key)
    if lines[line][:col].strip():
        raise _Unplaceable(f"key {key!r} shares its line with a list dash")
    return line, col


def _entry_end(lines: list[str], line: int, col: int, dash_at_col: bool) -> int:
    """The index after the last content line of the entry whose key sits at (line, col): its trailing comment and
    blank lines belong to what follows (a section's header comment)."""
    last = line
    for j in range(line + 1, len(lines)):
        stripped = lines[j].strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(lines[j]) - len(lines[j].lstrip(" "))
        if stripped in ("---", "...") and indent == 0:
            break
        if indent < col or (indent == col and not (dash_at_col and stripped.startswith("-"))):
            break
        last = j
    return last + 1


def _dash_at_col(value: Any, col: int) -> bool:
    return isinstance(value, CommentedSeq) and not _flow(value) and value.lc.col == col


def _delete(node: CommentedMap, key: Any, lines: list[str]) -> _Edit:
    line, col = _key_line(node, key, lines)
    return _Edit(line, _entry_end(lines, line, col, _dash_at_col(node[key], col)), [])


def _insert(node: CommentedMap, own: list[Any], key: Any, value: Any, lines: list[str],
            render: Renderer) -> _Edit:
    if not own:
        raise _Unplaceable("a mapping with no key of its own to insert after")
    ends = []
    for k in own:
        line, col = _key_line(node, k, lines)
        ends.append((_entry_end(lines, line, col, _dash_at_col(node[k], col)), col))
    end, col = max(ends)
    return _Edit(end, end, _indented(render(CommentedMap([(key, value)])), col))


def _replace(node: CommentedMap, key: Any, want: Any, lines: list[str], render: Renderer) -> _Edit:
    line, col = _key_line(node, key, lines)
    end = _entry_end(lines, line, col, _dash_at_col(node[key], col))
    inline = _inline_text(lines[line], col)
    if inline and end == line + 1:
        # the value sits on the key line: rewrite its span only (anchor, quotes style and comment stay)
        start, stop = inline
        head = lines[line][start:stop]
        anchor = ""
        if head.startswith("&"):
            anchor, _, head = head.partition(" ")
            anchor += " "
            head = head.lstrip(" ")
        flow = head.startswith(("[", "{"))
        text = _inline_value(want, head, flow, render)
        if text is not None:
            new = lines[line][:start] + anchor + text + lines[line][stop:]
            return _Edit(line, line + 1, [new])
    if not inline and isinstance(want, (dict, list)) and want and end > line + 1:
        # a block value under a key line that stays (its comment too): the value's lines at their own indentation
        first = next(j for j in range(line + 1, end) if lines[j].strip() and not lines[j].strip().startswith("#"))
        indent = len(lines[first]) - len(lines[first].lstrip(" "))
        body = render(CommentedMap([(key, want)])).splitlines(keepends=True)[1:]
        return _Edit(line + 1, end, _indented("".join(_dedented(body)), indent))
    return _Edit(line, end, _indented(render(CommentedMap([(key, want)])), col))


def _inline_text(line: str, col: int) -> tuple[int, int] | None:
    """The span of the value written on a key's own line (None when the value is a block below it)."""
    colon = _colon(line, col)
    start = colon + 1
    while start < len(line) and line[start] == " ":
        start += 1
    stop = _content_end(line, start)
    if stop <= start or all(t[:1] in "&!" for t in line[start:stop].split()):
        return None  # nothing, or only the anchor/tag of a block value below
    return start, stop


def _colon(line: str, col: int) -> int:
    i = col
    if i < len(line) and line[i] in "\"'":
        quote = line[i]
        i += 1
        while i < len(line) and line[i] != quote:
            i += 2 if line[i] == "\\" and quote == '"' else 1
        i += 1
    while i < len(line):
        if line[i] == ":" and (i + 1 >= len(line) or line[i + 1] in " \t\r\n"):
            return i
        i += 1
    raise _Unplaceable(f"no mapping colon in {line!r}")


def _content_end(line: str, start: int) -> int:
    """Where the text from ``start`` ends before an inline comment and trailing whitespace (quotes respected)."""
    i, quote, end = start, "", start
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                end = i
                continue
            if ch == quote:
                quote = ""
            end = i + 1
        elif ch in "\"'" and (i == start or line[i - 1] in " [{,:"):
            quote, end = ch, i + 1
        elif ch == "#" and (i == start or line[i - 1] in " \t"):
            break
        elif ch not in " \t\r\n":
            end = i + 1
        i += 1
    return end


def _inline_value(want: Any, old: str, flow: bool, render: Renderer) -> str | None:
    """``want`` written in the style ``old`` was (quotes, boolean spelling, flow collection), on one line."""
    if isinstance(want, (dict, list)):
        if not flow:
            return None
        want = _flow_copy(want)
    elif isinstance(want, str) and old[:1] == '"':
        want = DoubleQuotedScalarString(want)
    elif isinstance(want, str) and old[:1] == "'":
        want = SingleQuotedScalarString(want)
    elif isinstance(want, bool) and old.lower() in ("true", "false"):
        text = "true" if want else "false"
        return text.upper() if old.isupper() else text.capitalize() if old[:1].isupper() else text
    out = render(CommentedMap([("k", want)]))
    if out.count("\n") != 1 or not out.startswith("k: "):
        return None
    return out[3:].rstrip("\n")


def _flow_copy(value: Any) -> Any:
    if isinstance(value, dict):
        out = CommentedMap((k, _flow_copy(v)) for k, v in value.items())
    elif isinstance(value, list):
        out = CommentedSeq(_flow_copy(v) for v in value)
    else:
        return value
    out.fa.set_flow_style()
    return out


def _dedented(lines: list[str]) -> list[str]:
    width = min((len(s) - len(s.lstrip(" ")) for s in lines if s.strip()), default=0)
    return [s[width:] if s.strip() else s for s in lines]


def _indented(text: str, col: int) -> list[str]:
    return [(" " * col + s) if s.strip() else s for s in text.splitlines(keepends=True)]


def render_with(yaml_factory: Callable[[], YAML]) -> Renderer:
    """A renderer writing one entry through ``yaml_factory()``'s emitter (its indentation settings)."""

    def render(entry: Any) -> str:
        out = io.StringIO()
        yaml_factory().dump(_detached(entry), out)
        return out.getvalue()

    return render


def _detached(value: Any) -> Any:
    """A copy without anchors or comments: an entry written alone must not redefine an anchor the text has."""
    if isinstance(value, dict):
        out: Any = CommentedMap((k, _detached(v)) for k, v in value.items())
    elif isinstance(value, list):
        out = CommentedSeq(_detached(v) for v in value)
    else:
        anchor = getattr(value, "anchor", None)
        if anchor is not None and getattr(anchor, "value", None):
            for kind in (bool, int, float, str):
                if isinstance(value, kind):
                    return kind(value)
        return value
    if _flow(value):
        out.fa.set_flow_style()
    return out
