"""How the target's own trainer materialises a meta-device model, read from its code (``fsdp/train/trainer.py``).

Why: the advice a model plugin needs for its non-persistent buffers (rotary ``inv_freq``, ``position_ids``) depends on
what the trainer calls after building on meta, and the targets differ. The real MindSpeed-MM calls its own
``to_empty_if_needed(model, device)``: ``model._apply`` with fresh storage for parameters only, buffers moved with their
values — a ``to_empty`` override on the plugin never runs, and what ``__init__`` computed survives. The stand-in
does the same (it used to call ``model.to_empty``, which gives every tensor fresh storage and runs the override; the
real trainer never does). A target whose trainer calls ``Module.to_empty`` is still read as such. Both skip
``init_weights`` when ``training.load`` is set. The prompt said "recompute them in init_weights", which a resumed load
never calls; it now says what this target does, found here (not assumed per target name).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

TRAINER = "mindspeed_mm/fsdp/train/trainer.py"
INIT_CALLS = ("init_weights", "init_model_weights")
STORAGE_CALLS = {"to_empty_if_needed": "to_empty_if_needed", "to_empty": "Module.to_empty"}


def _called(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        fn = node.func
        return fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
    return None


def _function_text(root: Path, name: str) -> tuple[str, str] | None:
    """The source of the target's own ``def name`` under mindspeed_mm/fsdp (file relative to root, text)."""
    for path in sorted((root / "mindspeed_mm" / "fsdp").rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if f"def {name}(" not in text:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name == name:
                return path.relative_to(root).as_posix(), ast.get_source_segment(text, fn) or ""
    return None


def meta_init_facts(root: Path) -> dict[str, Any]:
    """``storage``: ``to_empty_if_needed`` / ``Module.to_empty`` / None (the call the trainer makes, with ``at``);
    ``buffers_kept``: whether that call leaves buffers' values in place (True when the target's function gives new
    storage to ``nn.Parameter`` tensors only); ``init_weights``: ``only without training.load`` when the trainer's
    init call sits under a condition on ``load``."""
    path = root / TRAINER
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        tree = ast.parse(text)
    except (OSError, SyntaxError) as exc:
        return {"storage": None, "error": f"{TRAINER} not readable: {exc}"}
    calls = sorted((node.lineno, _called(node)) for node in ast.walk(tree) if _called(node) in STORAGE_CALLS)
    # the target's own function wins over a plain to_empty elsewhere in the file; the first call of it is named
    best = [c for c in calls if c[1] == "to_empty_if_needed"] or calls
    storage = STORAGE_CALLS[best[0][1]] if best else None
    at = f"{TRAINER}:{best[0][0]}" if best else None
    init = None
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "load" in ast.unparse(node.test):
            body = [_called(n) for stmt in node.body for n in ast.walk(stmt)]
            if any(b in INIT_CALLS for b in body):
                init = "only without training.load"
    facts: dict[str, Any] = {"storage": storage, "at": at, "init_weights": init}
    if storage == "to_empty_if_needed":
        found = _function_text(root, "to_empty_if_needed")
        if found:
            facts["defined_in"] = found[0]
            # new storage for parameters only (an isinstance test on Parameter before empty_like), buffers kept
            facts["buffers_kept"] = "Parameter" in found[1] and "empty_like" in found[1]
    elif storage == "Module.to_empty":
        facts["buffers_kept"] = False
    return facts
