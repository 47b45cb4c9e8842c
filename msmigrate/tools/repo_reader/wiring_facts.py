"""How the target's own training code wires a plugin's loss and its batches, read from that code by AST.

Why: a live player read the model contract ("when loss_type is not raw, call self.loss_function") and had to grep
to learn where the loss type comes from and who sets ``loss_function``; and the data prompt said both "register a
collator" and "the dataset's collate_fn wins" for a dataset plugin. Both answers live in the target: the train
engine assigns ``model.loss_function`` from a YAML key, and the dataloader either prefers a dataset's ``collate_fn``
or always builds the collator named in ``collate_param``. Found here, not assumed per target name.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

TRAIN_DIR = "mindspeed_mm/fsdp/train"
DATA_DIR = "mindspeed_mm/fsdp/data"
_ARGS_PREFIXES = ("self.args.", "args.", "self.config.", "config.")


def _modules(root: Path, rel: str) -> list[tuple[str, str, ast.Module]]:
    out = []
    for path in sorted((root / rel).rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
            out.append((path.relative_to(root).as_posix(), text, ast.parse(text)))
        except (OSError, SyntaxError, ValueError):
            continue
    return out


def _yaml_key(node: ast.Attribute) -> str:
    """``args.features.loss_cfg.loss_type`` → ``features.loss_cfg.loss_type`` (the YAML path the argument mirrors)."""
    text = ast.unparse(node)
    for prefix in _ARGS_PREFIXES:
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def _sets_loss_function(node: ast.AST) -> bool:
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Attribute) and t.attr == "loss_function" for t in node.targets)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
        args = node.args
        return len(args) >= 2 and isinstance(args[1], ast.Constant) and args[1].value == "loss_function"
    return False


def loss_wiring_facts(root: Path) -> dict[str, Any]:
    """``set_at``: where the target's train code assigns ``model.loss_function`` (file:line); ``key``: the argument
    path of the loss type that code reads (``features.loss_cfg.loss_type``). Empty when no such assignment is
    found."""
    for rel, _text, tree in _modules(root, TRAIN_DIR):
        sets = sorted(n.lineno for n in ast.walk(tree) if _sets_loss_function(n))
        if not sets:
            continue
        keys = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "loss_type"]
        return {"set_at": f"{rel}:{sets[0]}", "key": _yaml_key(keys[0]) if keys else None}
    return {}


def _reads_dataset_collate_fn(node: ast.AST) -> bool:
    """``hasattr(dataset, "collate_fn")`` / ``getattr(dataset, "collate_fn", ...)`` / ``dataset.collate_fn``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr"):
        a = node.args
        return len(a) >= 2 and isinstance(a[0], ast.Name) and "dataset" in a[0].id and \
            isinstance(a[1], ast.Constant) and a[1].value == "collate_fn"
    return isinstance(node, ast.Attribute) and node.attr == "collate_fn" and isinstance(node.value, ast.Name) and \
        "dataset" in node.value.id


def collate_wiring_facts(root: Path) -> dict[str, Any]:
    """``dataset_collate_fn_wins``: whether the target's dataloader uses a dataset's own ``collate_fn`` instead of
    the collator (``at``: file:line, ``in``: the function that does it); False when its dataloader code never reads
    a dataset's ``collate_fn`` (the collator named in ``collate_param`` is always what batches)."""
    seen = False
    for rel, _text, tree in _modules(root, DATA_DIR):
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            hits = sorted(n.lineno for n in ast.walk(fn) if _reads_dataset_collate_fn(n))
            if "collat" in ast.unparse(fn):
                seen = True
            if hits:
                return {"dataset_collate_fn_wins": True, "at": f"{rel}:{hits[0]}", "in": fn.name}
    return {"dataset_collate_fn_wins": False} if seen else {}


def collate_advice(facts: dict[str, Any] | None, collator: str | None = None) -> str:
    """What batches a branch-C dataset on this target, in one sentence from ``collate_wiring_facts``: the data prompt,
    the plan and the ``plugin-route-data`` doc all say it with these words, so none of them can drift from the
    target's own dataloader (the doc used to say the dataset returns a ``collate_fn`` that builds the batch, while
    the prompt said to give it none). One answer, never "register a collator" and "return a collate_fn" both."""
    who = f"the collator `{collator}` (`collate_param.collator_id`)" if collator else \
        "the collator named in `collate_param.collator_id` (registered as in branch B)"
    if facts and facts.get("dataset_collate_fn_wins"):
        return (f"{who} batches its samples, so give the dataset no `collate_fn`: this target's dataloader uses a "
                f"dataset's own `collate_fn` instead of the collator (`{facts.get('in')}`, `{facts.get('at')}`).")
    if facts and facts.get("dataset_collate_fn_wins") is False:
        return f"{who} batches its samples (this target's dataloader never reads a dataset's `collate_fn`)."
    return f"{who} batches its samples; give the dataset no `collate_fn`."
