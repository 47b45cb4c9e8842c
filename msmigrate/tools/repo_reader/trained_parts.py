"""Which of the model's parameters the source's training trains, read from the source itself (no import, no run): the
oracle a delivered ``model.freeze`` is set against.

A freeze list changes what training does from the first update on, and no parity gate sees it: G4's training parity
steps both sides with the delivered YAML's trainable set. So the source says what it trains, in this order:

1. its launch scripts choosing the parts that train (a flag such as ``--freeze_vision_tower`` / ``--tune_mm_mlp``):
   a choice of the source's own, not read here — nothing is compared;
2. its code (the training files, and the model code it ships): a ``requires_grad_(…)`` call, a ``.requires_grad =``
   assignment, a ``freeze…`` function or an adapter library (PEFT) decides what trains its own way — not read;
3. otherwise, a source that trains through the HF ``Trainer`` or ships no training code trains what the Trainer's
   optimizer takes: every parameter with ``requires_grad`` (read from the installed transformers' ``create_optimizer``),
   and a freshly built model requires a gradient everywhere — every parameter trains.

A source whose own loop builds its optimizer is not read (``all`` is None): never a guess.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from msmigrate.tools.repo_reader.training_facts import _py_files
from msmigrate.tools.repo_reader.training_recipe import _HF_TRAINER, _parsed, _scripts, _transformers_module

# a launch flag that chooses which parts train (freeze_*, tune_*, train_vision…, *_trainable, lora…)
_PART_FLAG = re.compile(r"--(?P<flag>\w*(?:freeze|frozen|trainable|tune_|train_(?:vision|llm|projector|mlp)|lora)\w*)",
                        re.IGNORECASE)
# code that decides what trains itself
_OWN_CHOICE = re.compile(r"\.requires_grad_\(|\.requires_grad\s*=(?!=)|\bdef\s+\w*freeze\w*\(|\bget_peft_model\b|"
                         r"\bLoraConfig\b|\bpeft\b")


def _code_files(source: Path) -> list[Path]:
    """The training files and the model code the source ships at its top level."""
    return list(dict.fromkeys([*_py_files(source), *sorted(source.glob("*.py"))]))


def hf_trainer_trains_every_parameter() -> str | None:
    """Where the installed transformers' ``Trainer.create_optimizer`` hands the optimizer every parameter that requires
    a gradient (``file:line``); None when it cannot be read or does otherwise."""
    found = _transformers_module("trainer.py")
    if found is None:
        return None
    path, tree = found
    func = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "create_optimizer"), None)
    if func is None or "requires_grad" not in ast.unparse(func):
        return None
    return f"{path.name}:{func.lineno}"


def source_trained_parts(source: Path) -> dict[str, Any]:
    """``{"all": bool | None, "where", "why_not"}``: ``all`` True where the source's training trains every parameter;
    None where it decides what trains itself (``why_not`` names the place) or nothing could be read."""
    source = Path(source)
    for path in _scripts(source):
        try:
            m = _PART_FLAG.search(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        if m:
            return {"all": None, "where": path.name,
                    "why_not": f"the source's launch script chooses what trains ({path.name}: --{m.group('flag')})"}
    hf, training = False, _py_files(source)
    for path, text, _ in _parsed(_code_files(source)):
        if m := _OWN_CHOICE.search(text):
            where = f"{path.name}:{text.count(chr(10), 0, m.start()) + 1}"
            return {"all": None, "where": where, "why_not": f"the source's code chooses what trains ({where})"}
        hf = hf or (path in training and _HF_TRAINER.search(text) is not None)
    if training and not hf:
        return {"all": None, "where": None, "why_not": "the source's training code builds its optimizer its own way"}
    where = hf_trainer_trains_every_parameter()
    if where is None:
        return {"all": None, "where": None, "why_not": "the HF Trainer's optimizer could not be read"}
    return {"all": True, "where": f"the HF Trainer's optimizer takes every parameter that requires a gradient "
                                  f"({where}); the source's code freezes none", "why_not": None}
