"""Probe: dump the target's YAML argument schema as a JSON tree (runs INSIDE the target runtime).

Usage: ``python config_schema.py --target-root <MindSpeed-MM checkout> [--root-class module:Class]``
Prints one line ``MSMIGRATE_PROBE_RESULT {json}``; everything else on stdout/stderr is log.

Why introspection in the target runtime and not a static AST reading of ``params/*.py``:
- the schema is *pydantic v2 models* built from ``dataclasses.field(...)`` declarations, inherited bases,
  ``Optional``/``Union``/``Literal`` annotations, aliases imported across packages (``DataArguments as
  BasicDataAruments`` from ``func_utils/convert.py``) and ``default_factory`` sub-models. Pydantic itself resolves all
  of that (forward references, inheritance, required-vs-default) into ``model_fields``; re-deriving it from the AST
  would mean re-implementing pydantic's rules and import resolution, and would silently drift when a field moves;
- it reads exactly what the launched trainer will validate against: the same files, the same interpreter, the same
  pydantic version — including fields added by the target's own plugins or local edits;
- the cost is one short subprocess (the params modules import pydantic, ``torch`` and a few framework utils, not
  models), and the result is cached per target commit by the caller. Where no target runtime exists (tests, a laptop
  without the framework's deps) the caller passes a pre-computed schema JSON instead.

The probe is standalone: it imports nothing from msmigrate (the target runtime need not have it installed).
Defaults are never produced by instantiating sub-models (their ``model_post_init`` reads ``LOCAL_RANK`` etc.).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import importlib
import inspect
import json
import os
import sys
import traceback
import textwrap
import types
import typing

RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "
DEFAULT_ROOT = "mindspeed_mm.fsdp.params.argument:Arguments"
_SIMPLE_FACTORIES = (list, dict, set, tuple)


def emit(payload: dict) -> None:
    print(RESULT_MARKER + json.dumps(payload, default=repr), flush=True)


def _json_safe(value):
    if isinstance(value, (set, tuple)):
        value = list(value)
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def _is_pydantic_model(tp) -> bool:
    return isinstance(tp, type) and hasattr(tp, "model_fields") and hasattr(tp, "model_validate")


def describe_type(tp, stack: tuple) -> dict:
    """Annotation → JSON type node. Kinds: str int float bool none any literal optional union list dict model other."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is typing.Any or tp is object:
        return {"kind": "any"}
    if tp is type(None):
        return {"kind": "none"}
    if origin is typing.Annotated:
        return describe_type(args[0], stack)
    if origin is typing.Literal:
        return {"kind": "literal", "choices": [_json_safe(a) for a in args]}
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        options = [a for a in args if a is not type(None)]
        inner = describe_type(options[0], stack) if len(options) == 1 else {
            "kind": "union", "options": [describe_type(a, stack) for a in options]}
        return {"kind": "optional", "inner": inner} if len(options) < len(args) else inner
    if origin in (list, set, tuple, frozenset) or tp in (list, set, tuple, frozenset):
        item = describe_type(args[0], stack) if args and args[0] is not Ellipsis else {"kind": "any"}
        return {"kind": "list", "item": item}
    if origin is dict or tp is dict:
        return {"kind": "dict", "value": describe_type(args[1], stack) if len(args) == 2 else {"kind": "any"}}
    for simple in (bool, int, float, str):
        if tp is simple:
            return {"kind": simple.__name__}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"kind": "literal", "choices": [_json_safe(m.value) for m in tp]}
    if _is_pydantic_model(tp) or (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
        return describe_class(tp, stack)
    return {"kind": "other", "repr": repr(tp)}


def _factory_default(factory):
    """Value of a default_factory when it is a plain container; sub-model factories are described, not called."""
    if factory in _SIMPLE_FACTORIES:
        return True, _json_safe(factory())
    if isinstance(factory, type) and (_is_pydantic_model(factory) or dataclasses.is_dataclass(factory)):
        return False, None
    if isinstance(factory, types.LambdaType) and getattr(factory, "__name__", "") == "<lambda>":
        return True, _json_safe(factory())  # e.g. ``lambda: ["q_proj", "k_proj"]``
    return False, None


_BOUNDS = ("gt", "ge", "lt", "le")


def _constraints(items) -> dict:
    """Numeric bounds a field declares (pydantic ``Field(ge=...)`` / annotated_types metadata, or dataclass field
    metadata with the same names)."""
    found = {}
    for item in items:
        for bound in _BOUNDS:
            value = item.get(bound) if isinstance(item, dict) else getattr(item, bound, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                found[bound] = value
    return found


def _post_init_checks(cls) -> list:
    """The value checks the class's own ``model_post_init`` / ``__post_init__`` makes before it raises: each
    ``if <condition>: raise ...`` (nested ``if``s joined with ``and``) as the condition's source and the message's
    source. The caller evaluates a condition on a YAML's values only when every name in it is a field; the class
    is never instantiated (its post-init reads the launch environment)."""
    checks = []
    for name in ("model_post_init", "__post_init__"):
        method = cls.__dict__.get(name)
        if method is None:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
        except (OSError, TypeError, SyntaxError):
            continue
        func = tree.body[0] if tree.body and isinstance(tree.body[0], ast.FunctionDef) else None
        if func is not None:
            _collect_checks(func.body, [], checks)
    return checks


def _collect_checks(body, conditions, checks) -> None:
    for stmt in body:
        if not isinstance(stmt, ast.If):
            continue
        here = conditions + [ast.unparse(stmt.test)]
        raised = next((s for s in stmt.body if isinstance(s, ast.Raise)), None)
        if raised is not None and raised.exc is not None:
            args = getattr(raised.exc, "args", [])
            message = ast.unparse(args[0]) if args else ""
            checks.append({"when": " and ".join(f"({c})" for c in here), "message": message})
        _collect_checks(stmt.body, here, checks)
        if stmt.orelse:
            _collect_checks(stmt.orelse, conditions + [f"not ({ast.unparse(stmt.test)})"], checks)


def _field_node(annotation, required: bool, default, factory, description, stack, bounds=None) -> dict:
    node = {"type": describe_type(annotation, stack), "required": required}
    if bounds:
        node["constraints"] = bounds
    if factory is not None:
        known, value = _factory_default(factory)
        node["default_factory"] = getattr(factory, "__name__", repr(factory))
        if known:
            node["default"] = value
    elif not required:
        node["default"] = _json_safe(default)
    if description:
        node["description"] = str(description)
    return node


def describe_class(cls, stack: tuple = ()) -> dict:
    node = {"kind": "model", "class": cls.__name__, "module": cls.__module__}
    if cls in stack:  # recursive schema: stop here, the validator treats it as an open mapping
        node["recursive"] = True
        node["fields"] = {}
        return node
    stack = stack + (cls,)
    fields = {}
    if _is_pydantic_model(cls):
        node["extra"] = str(cls.model_config.get("extra") or "ignore")
        for name, info in cls.model_fields.items():
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            factory = info.default_factory
            required = info.is_required()
            fields[name] = _field_node(
                info.annotation, required, None if required else info.default, factory,
                info.description or extra.get("help"), stack, _constraints(info.metadata))
    else:  # plain dataclass (e.g. training.quantization_plan)
        node["extra"] = "forbid"
        try:
            hints = typing.get_type_hints(cls)
        except (NameError, TypeError):
            hints = {}
        for f in dataclasses.fields(cls):
            factory = None if f.default_factory is dataclasses.MISSING else f.default_factory
            required = f.default is dataclasses.MISSING and factory is None
            fields[f.name] = _field_node(
                hints.get(f.name, f.type), required, None if required else f.default, factory,
                f.metadata.get("help"), stack, _constraints([dict(f.metadata)]))
    node["fields"] = fields
    checks = _post_init_checks(cls)
    if checks:
        node["checks"] = checks
    return node


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target-root", required=True)
    parser.add_argument("--root-class", default=DEFAULT_ROOT)
    args = parser.parse_args(argv)
    os.environ.setdefault("NON_MEGATRON", "true")  # mindspeed_mm/__init__ imports Megatron otherwise
    root = os.path.abspath(args.target_root)
    sys.path.insert(0, root)
    module_name, _, class_name = args.root_class.partition(":")
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, class_name)
        schema = describe_class(cls)
    except Exception as exc:  # probe boundary: report the target's own error text to the agent
        emit({"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:]})
        return 1
    try:
        import pydantic
        pydantic_version = pydantic.VERSION
    except ImportError:
        pydantic_version = None
    emit({
        "schema_version": 1,
        "root_class": args.root_class,
        "target_root": root,
        "source_file": getattr(module, "__file__", None),
        "python": sys.version.split()[0],
        "pydantic": pydantic_version,
        "schema": schema,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
