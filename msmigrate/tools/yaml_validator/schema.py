"""Where the schema comes from: the target's own argument models, dumped by ``probes/config_schema.py``.

Three ways in: a schema dict already in hand, a JSON file (tests; machines without the target runtime), or running
the probe in the target runtime (``schema_from_target``), optionally cached per target commit under the run dir.
Accepted JSON shapes: the probe payload (``{"schema_version": 1, "schema": {...}}``) or the bare root model node.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from msmigrate.core.git import git, head_commit
from msmigrate.core.tool_result import ToolResult
from msmigrate.tools.runtime import run_probe

# Sections the plugin-route trainer reads (contract §3); used when a schema lacks the root wrapper.
SECTIONS = ("parallel", "model", "data", "training", "features", "tools")


def root_node(schema: dict) -> dict:
    """The root model node, whether given the probe payload or the node itself."""
    node = schema.get("schema", schema)
    if node.get("kind") != "model" or not isinstance(node.get("fields"), dict):
        raise ValueError("not a config schema: expected a model node with 'fields' (output of probes/config_schema.py)")
    return node


def load_schema_file(path: Path | str) -> dict:
    return root_node(json.loads(Path(path).read_text(encoding="utf-8")))


def _target_commit(target_root: Path) -> str | None:
    return head_commit(target_root)


def schema_from_target(
    target_root: Path,
    runtime_python: str,
    *,
    cache_dir: Path | None = None,
    env_extra: dict[str, str] | None = None,
    timeout: float = 180.0,
) -> ToolResult:
    """Run the probe in the target runtime. ``data['schema']`` is the root node; cached per commit when possible.

    A dirty work tree is not cached (the agent edits params only by mistake, but then the cache would lie)."""
    target_root = Path(target_root).resolve()
    commit = _target_commit(target_root)
    dirty = bool(commit) and bool(git(target_root, "status", "--porcelain", "--", "mindspeed_mm",
                                      check=False).stdout.strip())
    cache_file = cache_dir / f"config_schema_{commit}.json" if cache_dir and commit and not dirty else None
    if cache_file is not None and cache_file.is_file():
        return ToolResult.success(schema=load_schema_file(cache_file), source=str(cache_file), cached=True)
    result = run_probe(runtime_python, "config_schema", ["--target-root", str(target_root)],
                       cwd=target_root, env_extra={"NON_MEGATRON": "true", **(env_extra or {})}, timeout=timeout)
    if not result.ok:
        return result
    payload = result.data["result"]
    if cache_file is not None:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        cache_file.write_text(json.dumps(payload, indent=1), encoding="utf-8")
    return ToolResult.success(schema=root_node(payload), source="probe", cached=False, commit=commit)


def model_of(type_node: dict) -> dict | None:
    """The model node reachable through Optional / List wrappers, if any (used for path listing only)."""
    kind = type_node.get("kind")
    if kind == "model":
        return type_node
    if kind == "optional":
        return model_of(type_node["inner"])
    if kind == "union":
        for option in type_node["options"]:
            found = model_of(option)
            if found:
                return found
    return None


def _list_item_model(type_node: dict) -> dict | None:
    kind = type_node.get("kind")
    if kind == "optional":
        return _list_item_model(type_node["inner"])
    if kind == "list":
        return model_of(type_node["item"])
    return None


def iter_paths(node: dict, prefix: str = "") -> Iterator[tuple[str, dict]]:
    """Every declared key path with its field node; list-of-model items appear as ``a.b[].c``."""
    for name, fnode in node.get("fields", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        yield path, fnode
        sub = model_of(fnode["type"])
        if sub is not None:
            yield from iter_paths(sub, path)
        item = _list_item_model(fnode["type"])
        if item is not None:
            yield from iter_paths(item, path + "[]")


def all_paths(schema_root: dict) -> list[str]:
    return [p for p, _ in iter_paths(schema_root)]


def type_label(type_node: dict[str, Any]) -> str:
    """Human-readable type, for messages: ``Optional[List[str]]``, ``Literal['eager', 'sdpa']``."""
    kind = type_node.get("kind")
    if kind == "optional":
        return f"Optional[{type_label(type_node['inner'])}]"
    if kind == "union":
        return " | ".join(type_label(o) for o in type_node["options"])
    if kind == "list":
        return f"List[{type_label(type_node['item'])}]"
    if kind == "dict":
        return f"Dict[str, {type_label(type_node['value'])}]"
    if kind == "literal":
        return "Literal[" + ", ".join(repr(c) for c in type_node["choices"]) + "]"
    if kind == "model":
        return type_node.get("class", "mapping")
    if kind == "other":
        return type_node.get("repr", "?")
    return kind
