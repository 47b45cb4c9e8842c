"""YAML loading that keeps line numbers and catches the gotchas PyYAML lets through or words badly.

The target parses with ``yaml.safe_load``; this loader composes the same node graph (same errors for broken YAML),
records the 1-based line of every key / list item by path, reports duplicate keys (PyYAML silently keeps the last
one) and turns the two known gotchas (contract §2.2, §13 #36) into findings with a fix:
``{*}`` patterns inside a flow list (``[model.layers.{*}]`` → ``while scanning an alias``) and repeated anchors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from msmigrate.tools.yaml_validator.findings import Finding, join_path


@dataclass
class LoadedYaml:
    data: Any = None
    lines: dict[str, int] = field(default_factory=dict)  # path → 1-based line
    findings: list[Finding] = field(default_factory=list)

    def line_of(self, path: str) -> int | None:
        """Line of ``path`` or of its nearest recorded ancestor (a missing key points at its parent section)."""
        while True:
            if path in self.lines:
                return self.lines[path]
            if not path:
                return None
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""


def _key_text(node: yaml.Node) -> str:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else "<complex key>"


def _walk(node: yaml.Node, path: str, out: LoadedYaml, seen: set[int]) -> None:
    if id(node) in seen:  # aliases share nodes; one visit is enough and avoids cycles
        return
    seen = seen | {id(node)}
    if isinstance(node, yaml.MappingNode):
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = _key_text(key_node)
            line = key_node.start_mark.line + 1
            if key == "<<":  # merge key: the merged mapping's keys live at this level
                merged = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for m in merged:
                    _walk(m, path, out, seen)
                continue
            if key in first_line:
                out.findings.append(Finding(
                    "error", "yaml-duplicate-key", join_path(path, key),
                    f"key `{key}` appears twice in the same mapping (lines {first_line[key]} and {line}); "
                    "PyYAML silently keeps the last value",
                    "keep one occurrence", line))
            first_line[key] = line
            child = join_path(path, key)
            out.lines[child] = line
            _walk(value_node, child, out, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            child = f"{path}[{i}]"
            out.lines[child] = item.start_mark.line + 1
            _walk(item, child, out, seen)


def _error_finding(exc: yaml.YAMLError) -> Finding:
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + 1 if mark is not None else None
    text = str(exc)
    if "duplicate anchor" in text:
        return Finding("error", "yaml-duplicate-anchor", "", f"YAML parsing failed: {text}",
                       "anchors (&name) must be unique per file; rename the second one and its aliases", line)
    if "while scanning an alias" in text or "while scanning an anchor" in text:
        return Finding("error", "yaml-unquoted-pattern", "", f"YAML parsing failed: {text}",
                       "a `{*}` / `*` pattern inside a flow list `[...]` is read as an alias; write the list in "
                       "block style (`- model.layers.{*}`) or quote each pattern", line)
    return Finding("error", "yaml-syntax", "", f"YAML parsing failed: {text}", None, line)


def load_yaml(text: str) -> LoadedYaml:
    out = LoadedYaml()
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            out.findings.append(Finding("error", "yaml-not-mapping", "", "the YAML document is empty",
                                        "write the six sections parallel/model/data/training/features/tools"))
            return out
        _walk(node, "", out, set())  # before construction: merge keys are flattened into the nodes by it
        out.data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        out.findings.append(_error_finding(exc))
        out.data = None
    finally:
        loader.dispose()
    if out.data is not None and not isinstance(out.data, dict):
        out.findings.append(Finding("error", "yaml-not-mapping", "",
                                    f"top level must be a mapping of sections, got {type(out.data).__name__}", None, 1))
        out.data = None
    return out
