"""The source's own training pipeline, found in its files and read by AST (no import, no run): the oracle a migration
must match when the source ships one.

A remote-code family often trains through code of its own rather than through ``forward(**batch) → .loss``: a
``finetune/`` folder or a ``train*.py`` with a dataset class that builds ids and labels from the family's own data
format, a collator, and a ``Trainer`` subclass whose ``compute_loss`` calls the model in its own way (one dict, kwargs,
positional) and computes the loss outside the model — with labels the dataset already shifted, or aligned labels the
loss shifts. What is read here:

- ``entry``: the training files (``finetune/``, ``train/``, ``train*.py``, ``finetune*.py``, ``trainer*.py``);
- ``trainer``: a ``Trainer`` subclass's ``compute_loss`` (file, line), how it calls the model, whether it computes the
  loss itself (a cross-entropy call) or reads the model's ``.loss``;
- ``dataset`` / ``collator``: the dataset class (``__getitem__``), the collate function or class;
- ``data_keys``: the string keys the dataset code reads from a raw sample (``conversations``, ``image``, ``role`` …):
  the data format its loader reads;
- ``label_convention``: ``aligned`` (the loss shifts: ``logits[..., :-1]`` against ``labels[..., 1:]``) or
  ``pre-shifted`` (the dataset writes label i = token i+1 and the loss compares position by position), with the
  evidence line;
- ``masking``: the dataset's lines that write the ignore index (which positions train: the source's rule, verbatim);
- ``forward_call``: ``kwargs`` / ``one dict`` / ``positional`` — from the trainer's call, else from the forward
  signature.

Without training code the oracle is the class's own forward loss under the HF ``Trainer`` (``kind: hf``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

TRAINING_DIRS = ("finetune", "train", "training", "scripts")
TRAINING_FILE = re.compile(r"^(train|finetune|trainer|sft)[\w-]*\.py$|^(dataset|data_utils|collat\w*)\.py$")
MAX_FILES = 60
IGNORE_MARKERS = re.compile(r"-100\b|IGNORE_INDEX|ignore_index|IGNORE_TOKEN_ID|ignore_id")
LOSS_CALLS = re.compile(r"cross_entropy|CrossEntropyLoss|nll_loss|loss_fct|loss_fn")
# the loss shifts aligned labels itself: logits[..., :-1, :] against labels[..., 1:]
LOSS_SHIFT = re.compile(r"\[\s*(\.\.\.|:)\s*,\s*:-1\b|\[\s*(\.\.\.|:)\s*,\s*1:\s*\]|shift_(logits|labels)")
# the dataset writes label i = token i + 1 (target[i - 1] = ids[i], labels[:-1] = ids[1:])
PRE_SHIFT = re.compile(r"\[\s*\w+\s*-\s*1\s*\]\s*=\s*[\w.]+\[\s*\w+\s*\]|\[\s*:-1\s*\]\s*=\s*[\w.]+\[\s*1:\s*\]")


def _py_files(folder: Path) -> list[Path]:
    """Training-code candidates: files in the training folders, and training-named files at the top level."""
    out = [p for p in sorted(folder.glob("*.py")) if TRAINING_FILE.match(p.name)]
    for name in TRAINING_DIRS:
        sub = folder / name
        if sub.is_dir():
            out += sorted(p for p in sub.rglob("*.py") if ".venv" not in p.parts)
    return list(dict.fromkeys(out))[:MAX_FILES]


def _parse(path: Path) -> tuple[str, ast.Module] | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        return text, ast.parse(text, filename=path.name)
    except (OSError, SyntaxError, ValueError):
        return None


def _base_names(cls: ast.ClassDef) -> list[str]:
    return [ast.unparse(b).split(".")[-1] for b in cls.bases]


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == name), None)


def _model_call(fn: ast.FunctionDef) -> tuple[str, str] | None:
    """How ``compute_loss`` calls its model: (kind, the call's text)."""
    model_arg = fn.args.args[1].arg if len(fn.args.args) > 1 else "model"
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == model_arg:
            text = ast.unparse(node)
            if any(k.arg is None for k in node.keywords):
                return "kwargs", text
            dict_kw = [k.arg for k in node.keywords if isinstance(k.value, ast.Name)]
            if len(node.args) == 1 and isinstance(node.args[0], ast.Name) or dict_kw and not node.args:
                return "one dict", text
            return "positional", text
    return None


def call_kind_from_signature(signature: str | None) -> str | None:
    """``one dict`` for ``forward(self, data, **kwargs)`` (one plain parameter that is no tensor name), else
    ``kwargs``; None without a signature."""
    if not signature:
        return None
    try:
        fn = ast.parse(f"def {signature.strip()}:\n    pass\n").body[0]
    except SyntaxError:
        return None
    names = [a.arg for a in fn.args.args if a.arg != "self"]
    if len(names) == 1 and names[0] not in ("input_ids", "inputs_embeds", "pixel_values") and not fn.args.defaults:
        return "one dict"
    return "kwargs"


def _string_keys(tree: ast.AST) -> list[str]:
    """String subscripts and ``.get("…")`` keys the code reads: the record keys its loader expects."""
    keys: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
                isinstance(node.slice.value, str) and isinstance(node.ctx, ast.Load):
            keys.append(node.slice.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and \
                node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            keys.append(node.args[0].value)
    return list(dict.fromkeys(keys))


def _ignore_lines(text: str, tree: ast.AST, rel: str, limit: int = 8) -> list[str]:
    """The code lines that write the ignore index (a ``-100`` literal, an ``IGNORE_INDEX``-like name): which
    positions the source's dataset leaves out of the loss, verbatim (docstrings and comments are not code)."""
    lines = text.splitlines()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
                isinstance(node.operand, ast.Constant) and node.operand.value == 100:
            found.add(node.lineno)
        elif isinstance(node, (ast.Name, ast.Attribute)) and \
                IGNORE_MARKERS.search(node.id if isinstance(node, ast.Name) else node.attr):
            found.add(node.lineno)
    return [f"{rel}:{i}: {lines[i - 1].strip()}" for i in sorted(found)][:limit]


def _lines(text: str, pattern: re.Pattern, rel: str, limit: int = 8) -> list[str]:
    return [f"{rel}:{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1)
            if pattern.search(line) and not line.strip().startswith("#")][:limit]


def _model_loss_shift(folder: Path) -> list[str]:
    """Where the source's modeling code shifts logits against labels (its forward loss takes aligned labels)."""
    for path in sorted(folder.glob("modeling_*.py"))[:MAX_FILES]:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found = [line for line in _lines(text, LOSS_SHIFT, path.name, limit=40) if re.search(r"label|logit", line)]
        if found:
            return [f"{found[0]} (the model's forward loss shifts: labels aligned with input_ids)"]
    return []


def _processor_masking(folder: Path) -> list[str]:
    """The ignore-index lines of the source's own processor/tokenizer code: where a dataset only calls the family's
    processor (``process_one(…, inference_mode=False)``), the processor decides which positions train."""
    for path in sorted(folder.glob("processing_*.py")) + sorted(folder.glob("tokenization_*.py")):
        parsed = _parse(path)
        if parsed is not None and (lines := _ignore_lines(parsed[0], parsed[1], path.name)):
            return lines
    return []


def _tokenizer_setup(tree: ast.AST) -> list[dict[str, Any]]:
    """Assignments the training code makes to a tokenizer after loading it (``tokenizer.pad_token_id =
    tokenizer.eod_id``): the source's own pipeline runs with them. Only a constant or another attribute of the same
    tokenizer as the value (replayable without the script's other state): ``{"attr", "from_attr" | "value",
    "text"}``."""
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and
                isinstance(node.targets[0], ast.Attribute) and isinstance(node.targets[0].value, ast.Name)):
            continue
        name, attr, value = node.targets[0].value.id, node.targets[0].attr, node.value
        if "tokenizer" not in name.lower():
            continue
        text = f"tokenizer.{attr} = {ast.unparse(value).replace(name + '.', 'tokenizer.')}"
        if isinstance(value, ast.Constant):
            out.append({"attr": attr, "value": value.value, "text": text})
        elif isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == name:
            out.append({"attr": attr, "from_attr": value.attr, "text": text})
    return out


def source_training_facts(folder: Path, forward: dict[str, Any] | None = None) -> dict[str, Any]:
    folder = Path(folder)
    facts: dict[str, Any] = {"kind": "hf", "entry": [], "trainer": None, "dataset": None, "collator": None,
                             "data_keys": [], "label_convention": None, "label_evidence": None, "masking": [],
                             "loss_at": None, "forward_call": None, "tokenizer_setup": []}
    if not folder.is_dir():
        return facts
    loss_shift: list[str] = []
    pre_shift: list[str] = []
    for path in _py_files(folder):
        parsed = _parse(path)
        if parsed is None:
            continue
        text, tree = parsed
        rel = path.relative_to(folder).as_posix()
        facts["entry"].append(rel)
        facts["tokenizer_setup"] += [f for f in _tokenizer_setup(tree) if f not in facts["tokenizer_setup"]]
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            bases = _base_names(cls)
            loss = _method(cls, "compute_loss")
            if loss is not None and any(b.endswith("Trainer") for b in bases) and facts["trainer"] is None:
                body = ast.get_source_segment(text, loss) or ""
                call = _model_call(loss)
                computes = bool(LOSS_CALLS.search(body))
                facts["trainer"] = {"class": cls.name, "file": rel, "line": loss.lineno, "bases": bases,
                                    "computes_loss": computes, "model_call": call[1] if call else None}
                if call:
                    facts["forward_call"] = call[0]
                facts["loss_at"] = (f"{rel}:{loss.lineno} {cls.name}.compute_loss" if computes else
                                    f"the model's .loss (read by {rel}:{loss.lineno} {cls.name}.compute_loss)")
                if computes and LOSS_SHIFT.search(body):
                    loss_shift.append(f"{rel}:{loss.lineno} {cls.name}.compute_loss shifts logits against labels")
            if _method(cls, "__getitem__") is not None and facts["dataset"] is None and \
                    any("Dataset" in b for b in bases):
                facts["dataset"] = {"class": cls.name, "file": rel, "line": cls.lineno}
            if "collat" in cls.name.lower() and facts["collator"] is None:
                facts["collator"] = {"name": cls.name, "file": rel, "line": cls.lineno}
        for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
            if "collat" in fn.name.lower() and facts["collator"] is None:
                facts["collator"] = {"name": fn.name, "file": rel, "line": fn.lineno}
        if facts["dataset"] and facts["dataset"]["file"] == rel and not facts["data_keys"]:
            # the record keys: what the dataset class and the module's functions read (not another class: a
            # collator in the same file reads batch keys)
            reader = [n for n in tree.body if isinstance(n, ast.FunctionDef) or
                      isinstance(n, ast.ClassDef) and n.name == facts["dataset"]["class"]]
            facts["data_keys"] = list(dict.fromkeys(k for n in reader for k in _string_keys(n)))
            facts["masking"] = _ignore_lines(text, tree, rel)
            pre_shift += _lines(text, PRE_SHIFT, rel, limit=2)
    if not (facts["trainer"] or facts["dataset"] or facts["collator"]):
        # training-named files without a trainer, dataset or collator (a conversion script): no pipeline of its own
        facts["files_read"], facts["entry"] = facts["entry"], []
    if not facts["entry"]:
        facts["loss_at"] = "the model's forward (.loss), as the HF Trainer reads it"
        facts["forward_call"] = "kwargs"
        facts["label_convention"] = "aligned"
        facts["label_evidence"] = "no training code in the source: HF's forward loss is the oracle (labels shift inside)"
        return facts
    facts["kind"] = "own"
    if not facts["masking"]:
        facts["masking"] = _processor_masking(folder)
    if facts["forward_call"] is None:
        facts["forward_call"] = call_kind_from_signature((forward or {}).get("signature")) or "kwargs"
    if facts["trainer"] is None:
        facts["loss_at"] = "the model's forward (.loss): the training code overrides no compute_loss"
    if not loss_shift and not (facts["trainer"] or {}).get("computes_loss"):
        loss_shift = _model_loss_shift(folder)  # the model computes the loss: its forward says how
    if loss_shift:
        facts["label_convention"], facts["label_evidence"] = "aligned", loss_shift[0]
    elif pre_shift:
        facts["label_convention"], facts["label_evidence"] = "pre-shifted", pre_shift[0]
    elif facts["trainer"] and facts["trainer"]["computes_loss"]:
        facts["label_convention"] = "pre-shifted"
        facts["label_evidence"] = (f"{facts['loss_at']} compares logits and labels position by position (no shift): "
                                   "label i must already be token i+1")
    return facts


def contract_text(facts: dict[str, Any]) -> list[str]:
    """The source's training contract in sentences, for the plan and the phase prompts."""
    if not facts or facts.get("kind") != "own":
        return ["the source ships no training code: the oracle is HF's Trainer with the class's own forward loss "
                "(forward(**batch) → .loss, labels aligned with input_ids, shifted inside the loss)"]
    out = [f"the source's own training code: {', '.join(facts['entry'][:8])}"]
    if facts.get("dataset"):
        d = facts["dataset"]
        out.append(f"dataset {d['class']} ({d['file']}:{d['line']}) reads records with keys "
                   f"{facts.get('data_keys')[:12]}: the data format its loader reads")
    if facts.get("collator"):
        c = facts["collator"]
        out.append(f"collator {c['name']} ({c['file']}:{c['line']})")
    out.append(f"forward call: {facts.get('forward_call')}"
               + (f" — `{facts['trainer']['model_call']}`" if (facts.get("trainer") or {}).get("model_call") else ""))
    out.append(f"loss computed at: {facts.get('loss_at')}")
    if facts.get("label_convention"):
        out.append(f"label convention: {facts['label_convention']} ({facts.get('label_evidence')})")
    if facts.get("masking"):
        out.append("which positions train (the ignore-index lines of its dataset, else of its processor): "
                   + " | ".join(facts["masking"][:6]))
    if facts.get("tokenizer_setup"):
        out.append("the training code sets on its tokenizer: " + "; ".join(f["text"] for f in facts["tokenizer_setup"][:4]))
    for rec in (facts.get("measured") or {}).get("records") or []:
        out.append(f"measured on record {rec['record']} by the source's own pipeline: {rec['tokens']} tokens, "
                   f"{rec['trained']} trained — the trained stretches {rec['trained_text']}"
                   + (f"; media runs {rec['media_runs']}" if rec.get("media_runs") else "")
                   + (f" of {rec['at_media']}" if rec.get("media_runs") and rec.get("at_media") else "")
                   + (f"; the tag tokens it writes: {rec['tags_written']}" if rec.get("tags_written") else ""))
    if (facts.get("measured") or {}).get("error"):
        out.append(f"could not run the source's own pipeline on the records: {facts['measured']['error']}")
    return out


def measure_own_pipeline(runtime_python: str, source: Path, data: Path, facts: dict[str, Any], run_dir: Path,
                         trust_remote_code: bool = True, timeout: float = 300.0) -> dict[str, Any]:
    """The source's own dataset + collator run on the first records in the target runtime
    (``probes/own_pipeline_facts.py``): tokens, trained positions and their text, media runs per record; or
    ``{"error": …}`` when it cannot run (a fact for the plan, not a failure)."""
    import json

    from msmigrate.tools.runtime import run_probe

    path = Path(run_dir) / "probes" / "source_training.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(facts), encoding="utf-8")
    args = ["--source", str(source), "--data", str(data), "--facts", str(path)]
    res = run_probe(runtime_python, "own_pipeline_facts", args + (["--trust-remote-code"] if trust_remote_code else []),
                    env_extra={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}, timeout=timeout)
    if not res.ok:
        return {"error": (res.error or "the probe failed")[:400]}
    return res.data["result"]
