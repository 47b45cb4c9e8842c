"""Static Python outline by ``ast``: classes, functions, signatures, decorators, and MindSpeed-MM registrations.

Never imports the file. Registrations recognised (contract §4, §8):
- ``@model_register.register("id")`` / ``@data_register.register("id")`` decorators,
- the call form ``model_register.register("id")(obj)`` (used where a decorator cannot be, e.g. a factory function),
- ``_register_template(name=..., ..., mm_plugin=get_mm_plugin(name=..., image_token=...))`` calls,
- ``_register_data_collator("id", Cls)`` calls and ``DATA_COLLATOR = {...}`` / ``DATA_COLLATOR["id"] = Cls``,
- ``PLUGINS = {"name": PluginClass, ...}`` (the mm_plugin table).
"""

from __future__ import annotations

import ast
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from msmigrate.core.tool_result import ToolResult
from msmigrate.tools.repo_reader.files import resolve_inside

REGISTER_OBJECTS = {"model_register": "model", "data_register": "data"}


@dataclass
class Registration:
    kind: str  # model | data | template | collator | mm_plugin
    id: str
    target: str  # class / function / plugin class name ("" when not a plain name)
    file: str
    line: int
    extra: dict = field(default_factory=dict)


def _const_str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _name_of(node: ast.AST | None) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name_of(node.value)}.{node.attr}"
    return ""


def _register_call(node: ast.AST) -> tuple[str, str] | None:
    """``<x>_register.register("id")`` → (kind, id)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register"):
        return None
    owner = _name_of(node.func.value).split(".")[-1]
    kind = REGISTER_OBJECTS.get(owner)
    if kind is None:
        return None
    rid = _const_str(node.args[0]) if node.args else _const_str(next((k.value for k in node.keywords), None))
    return (kind, rid) if rid is not None else None


def _kwarg(call: ast.Call, name: str, pos: int | None = None) -> ast.AST | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if pos is not None and len(call.args) > pos:
        return call.args[pos]
    return None


def _signature(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    ret = f" -> {ast.unparse(fn.returns)}" if fn.returns else ""
    return f"{fn.name}({ast.unparse(fn.args)}){ret}"


def _func_entry(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict:
    return {"name": fn.name, "line": fn.lineno, "signature": _signature(fn),
            "decorators": [ast.unparse(d) for d in fn.decorator_list]}


def _top_level_defs(body: list[ast.stmt]):
    """Defs at module level, including those nested in if/try blocks (guarded imports and registrations)."""
    for stmt in body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            yield stmt
        elif isinstance(stmt, ast.If):
            yield from _top_level_defs(stmt.body + stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from _top_level_defs(stmt.body + stmt.orelse + stmt.finalbody
                                       + [s for h in stmt.handlers for s in h.body])


def registrations_in(tree: ast.Module, rel: str) -> list[Registration]:
    regs: list[Registration] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                hit = _register_call(dec)
                if hit:
                    extra = {"is_class": isinstance(node, ast.ClassDef)}
                    if not extra["is_class"]:  # a builder function: what the framework calls it with
                        extra["signature"] = f"{node.name}({ast.unparse(node.args)})"
                    regs.append(Registration(hit[0], hit[1], node.name, rel, dec.lineno, extra))
        elif isinstance(node, ast.Call):
            inner = _register_call(node.func)  # model_register.register("id")(obj)
            if inner and node.args:
                regs.append(Registration(inner[0], inner[1], _name_of(node.args[0]), rel, node.lineno,
                                         {"call_form": True}))
                continue
            fname = _name_of(node.func).split(".")[-1]
            if fname == "_register_template":
                regs.append(_template_registration(node, rel))
            elif fname == "_register_data_collator":
                cid = _const_str(_kwarg(node, "name", 0))
                if cid is not None:
                    regs.append(Registration("collator", cid, _name_of(_kwarg(node, "collator_cls", 1)), rel,
                                             node.lineno))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            regs.extend(_table_registrations(node, rel))
    return [r for r in regs if r is not None]


def _template_registration(call: ast.Call, rel: str) -> Registration | None:
    name = _const_str(_kwarg(call, "name", 0))
    if name is None:
        return None
    extra: dict = {}
    plugin = _kwarg(call, "mm_plugin")
    if isinstance(plugin, ast.Call):
        extra["mm_plugin"] = _const_str(_kwarg(plugin, "name", 0))
        for tok in ("image_token", "video_token", "audio_token"):
            val = _const_str(_kwarg(plugin, tok))
            if val is not None:
                extra[tok] = val
    tclass = _kwarg(call, "template_class")
    if tclass is not None:
        extra["template_class"] = _name_of(tclass)
    params = _kwarg(call, "params", 1)
    if isinstance(params, ast.Call):
        for slot in ("format_user", "format_assistant"):
            fmt = _kwarg(params, slot)
            slots = _kwarg(fmt, "slots") if isinstance(fmt, ast.Call) else None
            if isinstance(slots, (ast.List, ast.Tuple)):
                texts = [t for t in (_const_str(e) for e in slots.elts) if t is not None]
                if texts and len(texts) == len(slots.elts):  # only all-string slots compare as text
                    extra[slot] = "".join(texts)
        default_system = _const_str(_kwarg(params, "default_system"))
        if default_system is not None:
            extra["default_system"] = default_system
        stop = _kwarg(params, "stop_words")
        if isinstance(stop, (ast.List, ast.Tuple)):
            extra["stop_words"] = [s for s in (_const_str(e) for e in stop.elts) if s is not None]
    return Registration("template", name, "", rel, call.lineno, extra)


def _table_registrations(node: ast.Assign | ast.AnnAssign, rel: str) -> list[Registration]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    out: list[Registration] = []
    for t in targets:
        table = _name_of(t) if not isinstance(t, ast.Subscript) else _name_of(t.value)
        kind = {"PLUGINS": "mm_plugin", "DATA_COLLATOR": "collator"}.get(table)
        if kind is None:
            continue
        if isinstance(t, ast.Subscript):
            key = _const_str(t.slice)
            if key is not None:
                out.append(Registration(kind, key, _name_of(node.value), rel, node.lineno))
        elif isinstance(node.value, ast.Dict):
            for k, v in zip(node.value.keys, node.value.values):
                key = _const_str(k)
                if key is not None:
                    out.append(Registration(kind, key, _name_of(v), rel, k.lineno))
    return out


def outline_source(text: str, rel: str) -> dict:
    """Outline of one module's text; raises SyntaxError for invalid Python (callers turn it into a failure)."""
    tree = ast.parse(text, filename=rel)
    classes, functions = [], []
    for node in _top_level_defs(tree.body):
        if isinstance(node, ast.ClassDef):
            methods = [_func_entry(m) for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
            classes.append({"name": node.name, "line": node.lineno, "bases": [ast.unparse(b) for b in node.bases],
                            "decorators": [ast.unparse(d) for d in node.decorator_list], "methods": methods})
        else:
            functions.append(_func_entry(node))
    return {"file": rel, "classes": classes, "functions": functions,
            "registrations": [asdict(r) for r in registrations_in(tree, rel)]}


def outline(root: Path, path: str, class_name: str = "", max_chars: int = 10000) -> ToolResult:
    """Outline of ``root/path`` (a .py file). With ``class_name``, only that class, in full. When the full outline
    would exceed ``max_chars`` (large modeling files), methods are listed as ``name:line`` only."""
    p = resolve_inside(root, path)
    if p is None:
        return ToolResult.failure(f"path {path!r} is outside the root")
    if not p.is_file() or p.suffix != ".py":
        return ToolResult.failure(f"{path!r} is not a Python file under {root}")
    try:
        data = outline_source(p.read_text(encoding="utf-8", errors="replace"), path)
    except SyntaxError as exc:
        return ToolResult.failure(f"{path} does not parse: {exc.msg} at line {exc.lineno}")
    if class_name:
        picked = [c for c in data["classes"] if c["name"] == class_name]
        if not picked:
            return ToolResult.failure(f"no class {class_name!r} in {path}",
                                      classes=[c["name"] for c in data["classes"]])
        return ToolResult.success(file=path, classes=picked, registrations=[
            r for r in data["registrations"] if r["target"] == class_name], detail="full")
    detail = "full"
    if len(json.dumps(data, default=str)) > max_chars:
        detail = "method names only; pass class_name for signatures and decorators"
        for cls in data["classes"]:
            cls["methods"] = [f"{m['name']}:{m['line']}" for m in cls["methods"]]
    return ToolResult.success(**data, detail=detail)
