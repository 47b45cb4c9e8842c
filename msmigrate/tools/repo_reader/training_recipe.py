"""The source's optimizer recipe — gradient clipping, Adam's epsilon, weight decay — read from the source itself:
the oracle the delivered YAML's optimizer settings are set against (no import, no run).

Where the values come from, in order (each knob on its own; the first place that states it wins):

1. the source's own launch scripts (``*.sh`` in the source folder and its training folders): a flag passed to its
   trainer, ``--weight_decay 0.1`` / ``--max_grad_norm=1.0`` / ``--adam_epsilon 1e-6``;
2. its training code (``training_facts``' files): a literal keyword of a ``TrainingArguments(...)`` call, or one read
   from an ``argparse`` option whose ``default`` is a literal (``weight_decay=args.weight_decay`` with
   ``add_argument("--weight_decay", default=0.05)``); the field default of a ``TrainingArguments`` subclass;
3. the HF ``Trainer``'s own defaults (``TrainingArguments``' field defaults, read by AST from the installed
   transformers' ``training_args.py``) — for a source that trains through the HF Trainer or ships no training code
   at all (its conventional recipe is then the HF Trainer's).

The Trainer excludes biases and normalisation weights from decay (``Trainer.get_decay_parameter_names``) whatever
the value; ``no_decay`` says so. Training code that decides its decay groups itself (a ``create_optimizer`` /
``get_decay_parameter_names`` of its own, ``optimizer_grouped_parameters``, a group dict with a ``"weight_decay"``) is
not read for them: ``no_decay`` is None and ``no_decay_why_not`` names the place. A source whose training code builds its optimizer without the HF Trainer (a direct
``torch.optim`` call) is not read: ``basis`` is ``None`` and nothing is compared — never a guess.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from typing import Any

from msmigrate.tools.repo_reader.training_facts import TRAINING_DIRS, _py_files

KNOBS = ("max_grad_norm", "adam_epsilon", "weight_decay")
_SH_FLAG = re.compile(r"--(?P<name>max_grad_norm|adam_epsilon|weight_decay)[ =]+[\"']?(?P<value>[-+0-9.eE]+)")
_OWN_OPTIMIZER = re.compile(r"\btorch\.optim\.\w+\(|\b(?:AdamW|Adam|SGD)\(")
# training code that decides the decay groups itself (a Trainer subclass's own rule, or groups built by hand)
_OWN_GROUPS = re.compile(r"\bdef (?:create_optimizer|get_decay_parameter_names)\b|\boptimizer_grouped_parameters\b|"
                         r"[\"']weight_decay[\"']\s*:")


def _number(node: ast.AST | None) -> float | None:
    try:
        value = ast.literal_eval(node) if node is not None else None
    except (ValueError, SyntaxError, TypeError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _field_defaults(cls: ast.ClassDef) -> dict[str, float]:
    """``name: float = 1.0`` / ``= field(default=1.0, ...)`` in a dataclass body, for the recipe's knobs."""
    out = {}
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id in KNOBS:
            value = stmt.value
            if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] == "field":
                value = next((k.value for k in value.keywords if k.arg == "default"), None)
            if (number := _number(value)) is not None:
                out[stmt.target.id] = number
    return out


def _transformers_module(name: str) -> tuple[Path, ast.Module] | None:
    """(path, parsed tree) of a module file of the installed transformers (read, never imported); None when it is not
    installed or the file does not parse."""
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / name
    try:
        return path, ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None


def hf_trainer_defaults() -> dict[str, Any] | None:
    """The installed transformers' ``TrainingArguments`` defaults for the knobs; None when it is not installed."""
    found = _transformers_module("training_args.py")
    if found is None:
        return None
    path, tree = found
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TrainingArguments"), None)
    values = _field_defaults(cls) if cls is not None else {}
    return {"values": values, "where": str(path)} if set(values) == set(KNOBS) else None


def _argparse_defaults(tree: ast.AST) -> dict[str, float]:
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("add_argument") and node.args:
            flag = node.args[0].value if isinstance(node.args[0], ast.Constant) else None
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            if isinstance(flag, str) and (number := _number(default)) is not None:
                out[flag.lstrip("-").replace("-", "_")] = number
    return out


_HF_TRAINER = re.compile(r"TrainingArguments|\bTrainer\(")  # training code that trains through the HF Trainer


def _parsed(files: list[Path]):
    """(path, text, tree) of each training file that reads and parses."""
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
            yield path, text, ast.parse(text)
        except (OSError, SyntaxError, ValueError):
            continue


def _from_code(files: list[Path]) -> tuple[dict[str, tuple[float, str]], bool, bool, str | None]:
    """(knob -> (value, where), trains through the HF Trainer, builds its own optimizer, the file that builds its own
    decay groups)."""
    found: dict[str, tuple[float, str]] = {}
    hf = own_optimizer = False
    own_groups = None
    for path, text, tree in _parsed(files):
        hf = hf or _HF_TRAINER.search(text) is not None
        own_optimizer = own_optimizer or _OWN_OPTIMIZER.search(text) is not None
        if own_groups is None and (m := _OWN_GROUPS.search(text)):
            own_groups = f"{path.name}:{text.count(chr(10), 0, m.start()) + 1}"
        defaults = _argparse_defaults(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("TrainingArguments")
                                                      for b in node.bases):
                for k, v in _field_defaults(node).items():
                    found.setdefault(k, (v, f"{path.name}:{node.lineno}"))
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("TrainingArguments"):
                for kw in node.keywords:
                    if kw.arg not in KNOBS:
                        continue
                    value = _number(kw.value)
                    if value is None and isinstance(kw.value, ast.Attribute):
                        value = defaults.get(kw.value.attr)
                    if value is not None:
                        found.setdefault(kw.arg, (value, f"{path.name}:{node.lineno}"))
    return found, hf, own_optimizer, own_groups


def _scripts(source: Path) -> list[Path]:
    """The source's launch scripts: ``*.sh`` at its top and in its training folders."""
    return sorted(source.glob("*.sh")) + [p for d in TRAINING_DIRS for p in sorted((source / d).glob("*.sh"))]


def _from_scripts(source: Path) -> dict[str, tuple[float, str]]:
    found: dict[str, tuple[float, str]] = {}
    scripts = _scripts(source)
    for path in scripts:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for m in _SH_FLAG.finditer(text):
            try:
                found.setdefault(m.group("name"), (float(m.group("value")), path.name))
            except ValueError:
                continue
    return found


def source_recipe(source: Path) -> dict[str, Any]:
    """``{"basis", "values": {knob: value}, "where": {knob: file}, "no_decay"}``; ``basis`` None: not read."""
    source = Path(source)
    files = _py_files(source)
    code, hf, own_optimizer, own_groups = _from_code(files)
    if files and own_optimizer and not hf:
        return {"basis": None, "why_not": "the source's training code builds its own optimizer (not the HF Trainer)"}
    defaults = hf_trainer_defaults()
    if defaults is None:
        return {"basis": None, "why_not": "transformers' TrainingArguments could not be read"}
    values = dict(defaults["values"])
    where = {k: "the HF Trainer's default" for k in values}
    for k, (v, place) in {**code, **_from_scripts(source)}.items():  # a script's flag overrides the code's
        values[k], where[k] = v, place
    basis = "own training code (HF Trainer)" if files and hf else "HF Trainer defaults (no training code)"
    if own_groups:  # its own decay rule: not read (compared only where it is the HF Trainer's)
        return {"basis": basis, "values": values, "where": where, "defaults_file": defaults["where"],
                "no_decay": None, "no_decay_why_not": f"the source's training code builds its own decay groups "
                                                      f"({own_groups}): not read"}
    return {"basis": basis, "values": values, "where": where, "defaults_file": defaults["where"],
            "no_decay": "the HF Trainer exempts biases and normalisation weights (Trainer.get_decay_parameter_names)"}


# ---- the order training draws the records in -----------------------------------------------------------------------
_ORDER_FLAG = re.compile(r"--train_sampling_strategy[ =]+[\"']?(?P<value>\w+)")


def hf_trainer_order() -> dict[str, Any] | None:
    """Whether the installed transformers' ``Trainer`` draws its training records shuffled, read from its own code:
    ``_get_train_sampler`` returns a ``RandomSampler`` (for ``train_sampling_strategy`` "random", the default where
    the argument exists). None when the Trainer's code cannot be read or says neither."""
    found = _transformers_module("trainer.py")
    if found is None:
        return None
    path, tree = found
    sampler = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_get_train_sampler"),
                   None)
    if sampler is None or "RandomSampler" not in ast.unparse(sampler):
        return None
    return {"shuffled": True, "where": f"the HF Trainer's train sampler (RandomSampler, {path.name}:{sampler.lineno})"}


def _sampler_returned(func: ast.FunctionDef) -> bool | None:
    """A ``_get_train_sampler`` of the source's own Trainer: True when every sampler it returns is random, False when
    every one is sequential, None otherwise (a rule of its own: not read)."""
    kinds = {("random" if "RandomSampler" in ast.unparse(r.value) else "sequential"
              if "SequentialSampler" in ast.unparse(r.value) else "other")
             for r in ast.walk(func) if isinstance(r, ast.Return) and r.value is not None}
    return {frozenset({"random"}): True, frozenset({"sequential"}): False}.get(frozenset(kinds))


def _order_from_code(files: list[Path]) -> tuple[bool | None, str | None, bool]:
    """(shuffled, where, trains through the HF Trainer) from the source's training code: its own Trainer's
    ``_get_train_sampler``, a ``train_sampling_strategy`` keyword, a ``DataLoader`` it builds with a literal
    ``shuffle=`` (or a named sampler class)."""
    hf = False
    for path, text, tree in _parsed(files):
        hf = hf or _HF_TRAINER.search(text) is not None
        for node in ast.walk(tree):
            where = f"{path.name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.FunctionDef) and node.name == "_get_train_sampler":
                return _sampler_returned(node), where, True
            if not isinstance(node, ast.Call):
                continue
            name = ast.unparse(node.func)
            for kw in node.keywords:
                if kw.arg == "train_sampling_strategy" and isinstance(kw.value, ast.Constant):
                    return kw.value.value != "sequential", where, True
                if name.endswith("DataLoader") and kw.arg == "shuffle" and isinstance(kw.value, ast.Constant) \
                        and isinstance(kw.value.value, bool):
                    return kw.value.value, where, hf
                if name.endswith("DataLoader") and kw.arg == "sampler":
                    said = ast.unparse(kw.value)
                    if "RandomSampler" in said or "SequentialSampler" in said:
                        return "RandomSampler" in said, where, hf
    return None, None, hf


def source_data_order(source: Path) -> dict[str, Any]:
    """``{"shuffled": bool | None, "where", "why_not"}``: whether the source's training draws its records shuffled —
    its launch scripts' ``--train_sampling_strategy``, its training code (module docstring's order), else the HF
    Trainer's own sampler for a source that trains through it or ships no training code. None where the source's
    own loop decides it in a way not read here (never a guess)."""
    source = Path(source)
    scripts = _scripts(source)
    for path in scripts:
        try:
            m = _ORDER_FLAG.search(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        if m:
            return {"shuffled": m.group("value") != "sequential", "where": path.name, "why_not": None}
    files = _py_files(source)
    shuffled, where, hf = _order_from_code(files)
    if where is not None:
        return {"shuffled": shuffled, "where": where,
                "why_not": None if shuffled is not None else f"the source's own sampler ({where}) is not read"}
    if files and not hf:
        return {"shuffled": None, "where": None, "why_not": "the source's training code draws its records its own way"}
    found = hf_trainer_order()
    if found is None:
        return {"shuffled": None, "where": None, "why_not": "the HF Trainer's sampler could not be read"}
    return {**found, "why_not": None}
