"""The Megatron route's registered components, read from the target's own code by AST (nothing is imported).

The route has no register decorator: a sub-module's ``model_id`` in the model JSON is looked up in a module-level
dict (``VISION_ENCODER_MAPPINGS[config.vision_encoder.model_id]`` -> class, ``llm_layer_specs[config.model_id]``
-> layer-spec function). So a *registry* here is any module-level dict literal with string keys that its own
module subscripts with an expression ending in ``model_id``. Which model-JSON sub-module a registry serves (its
*role*) comes from the lookup itself (``config.vision_encoder.model_id`` -> ``vision_encoder``) or, when the lookup
only says ``config.model_id``, from the call sites of the enclosing function, followed through up to three calls
(``get_llm_layer_spec(config)`` inside ``_build_text_decoder_model(self, config)``, called with
``config.text_decoder`` -> ``text_decoder``). A registry whose role cannot be traced keeps role None.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MODELS_DIR = "mindspeed_mm/models"
MAX_HOPS = 3


@dataclass
class Component:
    model_id: str
    target: str  # the value's source text: a class or function name
    defined_in: str | None = None  # "file:line" of that class/function when it is found in the scanned tree


@dataclass
class Registry:
    name: str  # the dict's name, e.g. VISION_ENCODER_MAPPINGS
    file: str  # relative to the target root
    line: int
    lookup: str  # the subscript expression, e.g. config.vision_encoder.model_id
    function: str | None  # the function the lookup sits in
    role: str | None  # the model-JSON key the looked-up config belongs to (vision_encoder, text_decoder, ...)
    components: list[Component] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [c.model_id for c in self.components]


@dataclass
class MegatronRegistry:
    registries: list[Registry] = field(default_factory=list)
    files_read: int = 0
    error: str | None = None

    def for_role(self, role: str) -> list[Registry]:
        return [r for r in self.registries if r.role == role]

    def ids_for(self, role: str) -> set[str]:
        return {i for r in self.for_role(role) for i in r.ids}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _parse(path: Path) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            return ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return None  # a file that does not parse registers nothing we can trust


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _enclosing_function(node: ast.AST, parents: dict) -> ast.FunctionDef | None:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


def _ends_in_model_id(expr: ast.AST) -> bool:
    return (isinstance(expr, ast.Attribute) and expr.attr == "model_id") or (
        isinstance(expr, ast.Name) and expr.id == "model_id")


def _role_of(expr: ast.AST) -> str | None:
    """``config.vision_encoder.model_id`` -> vision_encoder; ``config.model_id`` / ``model_id`` -> None."""
    if isinstance(expr, ast.Attribute) and expr.attr == "model_id":
        expr = expr.value
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


def _param_index(fn: ast.FunctionDef, name: str) -> int | None:
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if name not in names:
        return None
    idx = names.index(name) - (1 if names[0] in ("self", "cls") else 0)
    return idx if idx >= 0 else None


def _call_index(trees: dict[str, ast.Module]) -> dict[str, list[tuple[ast.Call, str]]]:
    """called name -> (call node, file) for every ``f(...)`` / ``x.f(...)`` in the scanned tree (built once)."""
    out: dict[str, list[tuple[ast.Call, str]]] = {}
    for rel, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                if name:
                    out.setdefault(name, []).append((node, rel))
    return out


def _trace_role(calls: dict, parents: dict[str, dict], fn: ast.FunctionDef | None, param: str | None,
                hops: int = MAX_HOPS, seen: set | None = None) -> str | None:
    """Follow the parameter that carries the config back through the callers of ``fn``."""
    seen = set() if seen is None else seen
    if fn is None or param is None or hops == 0 or (fn, param) in seen:
        return None
    seen.add((fn, param))
    index = _param_index(fn, param)
    if index is None:
        return None
    for call, rel in calls.get(fn.name, []):
        if len(call.args) <= index:
            continue
        arg = call.args[index]
        role = _role_of(arg) if isinstance(arg, ast.Attribute) else None
        if role:
            return role
        if isinstance(arg, ast.Name):
            found = _trace_role(calls, parents, _enclosing_function(call, parents[rel]), arg.id, hops - 1, seen)
            if found:
                return found
    return None


def _definitions(trees: dict[str, ast.Module]) -> dict[str, str]:
    """name -> "file:line" of every top-level class / function in the scanned tree (first one wins)."""
    out: dict[str, str] = {}
    for rel, tree in trees.items():
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                out.setdefault(node.name, f"{rel}:{node.lineno}")
    return out


def read_registry(target: Path, models_dir: str = MODELS_DIR) -> MegatronRegistry:
    """Every model_id registry under ``<target>/<models_dir>`` with its role and entries."""
    root = Path(target) / models_dir
    if not root.is_dir():
        return MegatronRegistry(error=f"{models_dir} is not a folder of {target}")
    trees = {str(p.relative_to(target)): t for p in sorted(root.rglob("*.py")) if (t := _parse(p)) is not None}
    parents = {rel: _parents(t) for rel, t in trees.items()}
    defs = _definitions(trees)
    calls = _call_index(trees)
    out = MegatronRegistry(files_read=len(trees))
    for rel, tree in trees.items():
        tables = {}
        for node in tree.body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Dict) and node.value.keys
                    and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.value.keys)):
                tables[node.targets[0].id] = node
        if not tables:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                    and node.value.id in tables and _ends_in_model_id(node.slice)):
                continue
            table = tables.pop(node.value.id)  # the first lookup names the registry's role
            fn = _enclosing_function(node, parents[rel])
            role = _role_of(node.slice)
            if role is None:
                base = node.slice.value if isinstance(node.slice, ast.Attribute) else None
                role = _trace_role(calls, parents, fn, base.id if isinstance(base, ast.Name) else None)
            comps = [Component(k.value, ast.unparse(v), defs.get(ast.unparse(v).split(".")[-1]))
                     for k, v in zip(table.value.keys, table.value.values)]
            out.registries.append(Registry(node.value.id, rel, table.lineno, ast.unparse(node.slice),
                                           fn.name if fn else None, role, comps))
    return out


def registered_ids(target: Path, roles: tuple[str, ...] = ("vision_encoder", "vision_projector", "text_decoder",
                                                             "audio_encoder")) -> dict[str, set[str]]:
    """role -> model_ids the target registers for it (the shape agent/routes/megatron/components.match_components takes).
    A role no registry is traced to is left out, so the caller can tell "nothing registered" from "not traced"."""
    reg = read_registry(target)
    return {role: reg.ids_for(role) for role in roles if reg.for_role(role)}
