"""Round-trip editing of a framework YAML (ruamel.yaml): what a migration does not own keeps the example's comments,
anchors, aliases, key order and indentation.

``load`` gives a mapping that behaves as a dict; ``put`` sets one key in place (a new key goes last in its section)
and keeps an anchor on the value it replaces, so every alias of the old value follows; ``dump`` writes it back with
the indentation the source text used."""

from __future__ import annotations

import copy
import io
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.compat import ordereddict
from ruamel.yaml.error import CommentMark
from ruamel.yaml.scalarstring import PlainScalarString
from ruamel.yaml.tokens import CommentToken

from msmigrate.tools.yaml_splice import render_with, splice

_INDENT_ATTR = "_roundtrip_indent"
_SOURCE_ATTR = "_roundtrip_source"  # the text a document was loaded from: dump edits it rather than re-emitting it


def _yaml(mapping: int = 2, sequence: int = 4, offset: int = 2) -> YAML:
    y = YAML()  # round-trip
    y.preserve_quotes = True
    y.width = 4096  # never fold a long value or comment
    y.indent(mapping=mapping, sequence=sequence, offset=offset)
    # the framework's examples spell an empty value `null` (ruamel's round trip would write nothing)
    y.representer.add_representer(type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    return y


def load(text: str) -> CommentedMap:
    """The document of ``text`` (an empty one for an empty text), remembering its indentation."""
    if not text.strip():
        return CommentedMap()
    mapping = _mapping_indent(text)
    offset = _sequence_offset(text)
    sequence = max(mapping, offset + 2)
    doc = _yaml(mapping, sequence, offset).load(text)
    if not isinstance(doc, CommentedMap):
        raise ValueError("not a YAML mapping")
    setattr(doc, _INDENT_ATTR, (mapping, sequence, offset))
    setattr(doc, _SOURCE_ATTR, text)
    return doc


def _sequence_offset(text: str) -> int:
    """How far a block sequence's dash sits right of its parent key (0 or 2 in the framework's examples)."""
    parent = None
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        column = len(line) - len(stripped)
        if stripped.startswith("- ") and parent is not None:
            return max(0, column - parent)
        body = stripped.split(" #", 1)[0].rstrip()
        parent = column if body.endswith(":") else None
    return 2


def _mapping_indent(text: str) -> int:
    """The indentation of the first nested key (ruamel guesses only the sequences' one)."""
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if stripped and line != stripped and not stripped.startswith(("#", "- ")) and ":" in stripped:
            return len(line) - len(stripped)
    return 2


def clone(doc: CommentedMap) -> CommentedMap:
    """A deep copy that keeps comments, anchors, aliases (shared within the copy) and the indentation to write."""
    out = copy.deepcopy(doc)
    for attr in (_INDENT_ATTR, _SOURCE_ATTR):
        if hasattr(doc, attr):
            setattr(out, attr, getattr(doc, attr))
    return out


def dump(doc: Any) -> str:
    """The text of ``doc``: a loaded document's source with only its edited entries rewritten (byte for byte the
    source where nothing was edited); the whole document emitted where it has no source or an edit cannot be placed
    in it (yaml_splice says which)."""
    mapping, sequence, offset = getattr(doc, _INDENT_ATTR, (2, 4, 2))
    source = getattr(doc, _SOURCE_ATTR, None)
    if source is not None:
        text = splice(source, doc, render_with(lambda: _yaml(mapping, sequence, offset)))
        if text is not None:
            return text
    out = io.StringIO()
    _yaml(mapping, sequence, offset).dump(doc, out)
    return out.getvalue()


def _anchor_name(value: Any) -> str | None:
    anchor = getattr(value, "anchor", None)
    return getattr(anchor, "value", None) if anchor is not None else None


def _replace_identity(node: Any, old: Any, new: Any) -> None:
    """Every place in ``node`` that holds ``old`` itself (an alias of it) holds ``new`` instead."""
    if isinstance(node, dict):
        for key in list(node):
            if node[key] is old:
                node[key] = new
            else:
                _replace_identity(node[key], old, new)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            if item is old:
                node[i] = new
            else:
                _replace_identity(item, old, new)


def _commented(value: Any) -> Any:
    """Plain dicts/lists as round-trip nodes (so comments can be attached to them)."""
    if isinstance(value, dict) and not isinstance(value, CommentedMap):
        return CommentedMap((k, _commented(v)) for k, v in value.items())
    if isinstance(value, list) and not isinstance(value, CommentedSeq):
        return CommentedSeq(_commented(v) for v in value)
    return value


def _last_slot(node: Any) -> tuple[Any, Any] | None:
    """(container, key or index) of the last scalar entry under ``node``: where a comment after it is kept."""
    while isinstance(node, (CommentedMap, CommentedSeq)) and len(node):
        last = list(node)[-1] if isinstance(node, CommentedMap) else len(node) - 1
        child = node[last]
        if not isinstance(child, (CommentedMap, CommentedSeq)) or not len(child):
            return node, last
        node = child
    return None


def _tail(mapping: CommentedMap, key: Any) -> tuple[Any, Any]:
    return _last_slot(mapping[key]) or (mapping, key)


def _position(holder: Any) -> int:
    return 0 if isinstance(holder, CommentedSeq) else 2


def _take_below(holder: Any, where: Any) -> str:
    """The comment lines below the entry (a following section's header), cut from it; its inline comment stays."""
    entry = holder.ca.items.get(where) if hasattr(holder, "ca") else None
    token = entry[_position(holder)] if entry and len(entry) > _position(holder) else None
    text = getattr(token, "value", "") or ""
    if "\n" not in text or not text.split("\n", 1)[1]:
        return ""
    inline, below = text.split("\n", 1)
    token.value = inline + "\n"
    return below


def _give_below(holder: Any, where: Any, below: str) -> None:
    if not below or not hasattr(holder, "ca"):
        return
    entry = holder.ca.items.setdefault(where, [None, None, None, None])
    position = _position(holder)
    while len(entry) <= position:
        entry.append(None)
    if entry[position] is None:
        entry[position] = CommentToken("\n" + below, CommentMark(0), None)
    else:
        entry[position].value = entry[position].value.rstrip("\n") + "\n" + below


def put(doc: CommentedMap, section: dict, key: str, value: Any) -> None:
    """``section[key] = value`` inside ``doc``, in place (a new key goes last); an anchored scalar keeps its anchor
    and its aliases; the comment lines that followed the old entry (or the section's last one) follow the new."""
    old = section.get(key)
    if key in section and old == value and type(old) is type(value):
        return
    if not isinstance(section, CommentedMap):
        section[key] = value
        return
    if key in section:
        below = _take_below(*_tail(section, key))
    else:
        below = _take_below(*_tail(section, list(section)[-1])) if len(section) else ""
    name = _anchor_name(old)
    if name and isinstance(value, str):
        value = PlainScalarString(value, anchor=name)
        _replace_identity(doc, old, value)
    section[key] = _commented(value)
    _give_below(*_tail(section, key), below)
    _follow_merges(section, key)


def _follow_merges(section: CommentedMap, key: Any) -> None:
    """The mappings that merge ``section`` (``<<: *anchor``) and do not set ``key`` themselves see its new value, as
    a reader of the written YAML does (ruamel copies merged values once, at load)."""
    for referent in getattr(section, "_ref", []):
        if not isinstance(referent, CommentedMap) or key in referent._ok:
            continue
        source = next((m for m in getattr(referent, "merge", []) if key in m), None)
        if source is not None:
            ordereddict.__setitem__(referent, key, source[key])
        elif ordereddict.__contains__(referent, key):
            ordereddict.__delitem__(referent, key)
        _follow_merges(referent, key)


def put_mapping(doc: CommentedMap, section: dict, key: str, value: dict) -> None:
    """``section[key]`` becomes ``value`` key by key where it is a mapping already (order and comments of the keys
    that stay are kept; keys not in ``value`` go; new ones come last)."""
    current = section.get(key)
    if not isinstance(current, CommentedMap):
        put(doc, section, key, value)
        return
    for k in [k for k in current if k not in value]:
        remove(current, k)
    for k, v in value.items():
        put(doc, current, k, v)


def remove(mapping: dict, key: Any) -> Any:
    """``mapping.pop(key, None)``, keeping the comment lines that followed the key (the next section's header comment
    lives there in a round-trip document): they move to the entry that now comes last before them."""
    if key not in mapping:
        return None
    if not isinstance(mapping, CommentedMap):
        return mapping.pop(key)
    keys = list(mapping)
    index = keys.index(key)
    below = _take_below(*_tail(mapping, key))
    value = mapping.pop(key)
    if index > 0:
        # ruamel writes a comment kept on an anchored or aliased scalar before that line: skip such entries
        earlier = [k for k in reversed(keys[:index]) if not _anchor_name(mapping[k])] or [keys[index - 1]]
        _give_below(*_tail(mapping, earlier[0]), below)
    _follow_merges(mapping, key)
    return value


def section(doc: dict, *keys: str) -> dict:
    """The mapping at ``keys``, made (at the end of its parent) where it is missing."""
    node = doc
    for k in keys:
        child = node.get(k)
        if not isinstance(child, dict):
            child = CommentedMap()
            node[k] = child
        node = child
    return node


def plain(node: Any) -> Any:
    """A plain dict/list/scalar copy (for JSON, comparisons and PyYAML)."""
    if isinstance(node, dict):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, (list, CommentedSeq)):
        return [plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    for kind in (int, float, str):
        if isinstance(node, kind):
            return kind(node)
    return node
