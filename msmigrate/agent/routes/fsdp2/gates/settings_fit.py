"""G3: settings of the delivered YAML that must fit the model, the records and the parameters they apply to — each
one no gate launch exercises as delivered (G4–G6 train one small batch schedule in fp32, on a data-parallel mesh of
their own), so a value copied from another recipe would first show in the user's training:

- Expert parallelism on a model without experts: ``parallel.expert_parallel_size`` > 1 lays the ranks out on an
  expert dimension that a dense model (no ``experts`` module in its built tree, no expert count in its config.json)
  has nothing to place on.
- Modules kept out of FSDP (``fsdp_plan.ignored_modules``) that the YAML trains: their gradients are never averaged
  over the ranks.
- Gradients reduced in a narrower dtype than the parameters hold: ``fsdp_plan.reduce_dtype`` bf16 / fp16 under
  fp32 parameters averages every gradient over the ranks in 8 (or 11) mantissa bits, and the update then differs
  from the one the source computes in its own precision.
- A folder the YAML loads a model from that holds another model than the verified source (its kind or sizes).
- An optimizer step larger than the records: ranks × ``micro_batch_size`` × ``gradient_accumulation_steps`` samples
  per step, against the records the delivered YAML's own dataset files hold (capped by ``max_samples``): with fewer,
  every step repeats samples and an epoch is less than one step. Counted only where those files are here and
  readable (a JSON or JSON-lines file); otherwise not judged.
- A records file the dataset list names twice: every record of it is trained twice an epoch.
- A log interval longer than the run (``log_interval`` > ``train_iters``): no iteration line, no loss, is ever
  printed.
- A folder the YAML has the trainer write to (``save``, ``cache_dir``, ``output_dir``, ``log_dir`` …) that this host
  cannot create: the nearest folder of it that exists is a file, or is not writable (a read-only mount, another
  user's folder). The gates' launches save and cache under the run's own folder, so the first checkpoint of the
  user's training is where it would fail.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from msmigrate.agent.routes.fsdp2.config_fit import has_experts
from msmigrate.agent.routes.fsdp2.gates.source_settings import DTYPE_NAMES
from msmigrate.tools.module_match import module_name_match

def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


def ignored_trained_findings(cfg: dict[str, Any], tree: dict[str, Any] | None, config: str) -> list[dict[str, Any]]:
    """Modules ``parallel.fsdp_plan.ignored_modules`` keeps out of FSDP that ``model.freeze`` does not freeze: their
    parameters stay plain tensors on every rank, so their gradients are never averaged over the ranks (each rank
    trains its own copy, and the copies drift apart) and the trainer's gradient clipping meets plain tensors among
    its DTensors. Both lists match module names as the target does (``module_name_match``); a module is frozen when
    it or a module above it matches a freeze pattern."""
    ignored = _section(cfg, "parallel", "fsdp_plan").get("ignored_modules")
    names = (tree or {}).get("names") or []
    if not isinstance(ignored, list) or not ignored or not names:
        return []
    freeze = [p for p in (_section(cfg, "model").get("freeze") or []) if isinstance(p, str)]
    trained = [n for n in names if any(isinstance(p, str) and module_name_match(p, n) for p in ignored)
               and not any(module_name_match(f, a) for f in freeze for a in _ancestors(n))]
    if not trained:
        return []
    return [{"severity": "error", "code": "value-out-of-range", "path": "parallel.fsdp_plan.ignored_modules",
             "value": ignored,
             "message": f"parallel.fsdp_plan.ignored_modules keeps {', '.join(trained[:3])}"
                        f"{' …' if len(trained) > 3 else ''} out of FSDP, but model.freeze does not freeze "
                        f"{'it' if len(trained) == 1 else 'them'}: their parameters stay plain tensors on every rank, "
                        f"so their gradients are never averaged over the ranks (each rank trains its own copy) and "
                        f"gradient clipping meets plain tensors among DTensors; remove them from "
                        f"parallel.fsdp_plan.ignored_modules in {config}, or freeze them in model.freeze",
             "suggestion": "parallel.fsdp_plan.ignored_modules: []"}]


# mantissa bits: what a value keeps of a gradient (fp16 has more than bf16 but a range of 5 exponent bits)
_PRECISION = {"float64": 52, "float32": 23, "float16": 10, "bfloat16": 7}
MAX_COUNTED_BYTES = 64 << 20  # a JSON dataset file larger than this is not parsed to count its records


def _section(cfg: Any, *keys: str) -> dict[str, Any]:
    for key in keys:
        cfg = cfg.get(key) if isinstance(cfg, dict) else None
    return cfg if isinstance(cfg, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def expert_parallel_findings(cfg: dict[str, Any], tree: dict[str, Any] | None, source: Path,
                             config: str) -> list[dict[str, Any]]:
    size = _int(_section(cfg, "parallel").get("expert_parallel_size"))
    if size is None or size <= 1 or tree is None or has_experts(tree, source):
        return []
    return [{"severity": "error", "code": "value-out-of-range", "path": "parallel.expert_parallel_size",
             "value": size,
             "message": f"parallel.expert_parallel_size is {size}, but the model has no experts (no `experts` module "
                        f"in the built model's tree, no expert count in {Path(source).name}/config.json): expert "
                        f"parallelism lays the ranks out over experts this dense model does not have; set "
                        f"parallel.expert_parallel_size in {config} to 1",
             "suggestion": "parallel.expert_parallel_size: 1"}]


def _dtype(value: Any) -> str | None:
    return DTYPE_NAMES.get(str(value).lower().removeprefix("torch.")) if value is not None else None


def reduce_dtype_findings(cfg: dict[str, Any], config: str) -> list[dict[str, Any]]:
    plan = _section(cfg, "parallel", "fsdp_plan")
    reduce = _dtype(plan.get("reduce_dtype"))
    param = _dtype(plan.get("param_dtype")) or "float32"  # unset: the parameters stay in their own fp32
    if reduce is None or _PRECISION[reduce] >= _PRECISION[param]:
        return []
    return [{"severity": "error", "code": "precision-diverges", "path": "parallel.fsdp_plan.reduce_dtype",
             "value": plan.get("reduce_dtype"),
             "message": f"parallel.fsdp_plan.reduce_dtype is {plan.get('reduce_dtype')!r} under param_dtype "
                        f"{plan.get('param_dtype') or 'unset (fp32)'!s}: every gradient is averaged over the ranks "
                        f"in {reduce} ({_PRECISION[reduce]} mantissa bits) where the parameters hold "
                        f"{_PRECISION[param]}, so each update differs from the source's (the gates' parity runs "
                        f"fp32 and does not see it); set parallel.fsdp_plan.reduce_dtype in {config} to "
                        f"{'fp32' if param == 'float32' else param}",
             "suggestion": "parallel.fsdp_plan.reduce_dtype: fp32"}]


def dataset_records(cfg: dict[str, Any], target: Path) -> int | None:
    """How many records the YAML's own dataset files hold (``basic_parameters.dataset``: comma-separated files,
    relative ones from the checkout's root or from ``dataset_dir``), capped by ``max_samples``; None when one of
    them is not here, not JSON / JSON lines, or too large to parse."""
    basic = _section(cfg, "data", "dataset_param", "basic_parameters")
    files = dataset_files(cfg, target)
    if not files:
        return None
    total = 0
    for _, path in files:
        count = _count(path) if path is not None else None
        if count is None:
            return None
        total += count
    cap = _int(basic.get("max_samples"))
    return min(total, cap) if cap and cap > 0 else total


def dataset_files(cfg: dict[str, Any], target: Path) -> list[tuple[str, Path | None]]:
    """(name as listed, the file it resolves to — None when not here) for each entry of ``basic_parameters.dataset``
    (comma-separated; relative ones from the checkout's root or from ``dataset_dir``)."""
    basic = _section(cfg, "data", "dataset_param", "basic_parameters")
    names = basic.get("dataset")
    if isinstance(names, list):
        names = ",".join(str(n) for n in names)
    if not isinstance(names, str) or not names.strip():
        return []
    out = []
    for name in (n.strip() for n in names.split(",") if n.strip()):
        where = [Path(name)] if Path(name).is_absolute() else \
            [Path(target) / name] + ([Path(target) / str(basic["dataset_dir"]) / name]
                                     if isinstance(basic.get("dataset_dir"), str) else [])
        out.append((name, next((p for p in where if p.is_file()), None)))
    return out


def repeated_dataset_findings(cfg: dict[str, Any], target: Path, config: str) -> list[dict[str, Any]]:
    """A records file the YAML's dataset list names more than once (as written, or resolving to one file): the
    data path reads each entry, so every record of it is trained that many times an epoch and steps see
    duplicates."""
    seen: dict[str, list[str]] = {}
    for name, path in dataset_files(cfg, target):
        seen.setdefault(str(path.resolve()) if path is not None else name, []).append(name)
    return [{"severity": "error", "code": "bad-value", "path": "data.dataset_param.basic_parameters.dataset",
             "value": ", ".join(names),
             "message": f"data.dataset_param.basic_parameters.dataset lists {names[0]} {len(names)} times: the data "
                        f"path reads every entry, so each of its records is trained {len(names)} times an epoch; "
                        f"list it once in {config}"}
            for names in seen.values() if len(names) > 1]


def _count(path: Path) -> int | None:
    try:
        if path.stat().st_size > MAX_COUNTED_BYTES:
            return None
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        records = json.loads(text)
    except json.JSONDecodeError:
        try:
            return sum(1 for ln in text.splitlines() if ln.strip() and json.loads(ln) is not None)
        except json.JSONDecodeError:
            return None
    return len(records) if isinstance(records, list) else 1 if isinstance(records, dict) else None


def step_records_findings(cfg: dict[str, Any], ranks: int | None, target: Path, script: str,
                          config: str) -> list[dict[str, Any]]:
    """``ranks``: the data-parallel ranks the launch script starts (None: not known, not judged)."""
    training = _section(cfg, "training")
    mbs, accumulation = _int(training.get("micro_batch_size")), _int(training.get("gradient_accumulation_steps"))
    if not ranks or not mbs or mbs < 1:
        return []  # a size out of range is the range check's
    accumulation = accumulation if accumulation and accumulation > 0 else 1
    need = ranks * mbs * accumulation
    records = dataset_records(cfg, target)
    if records is None or records >= need:
        return []
    key = "training.gradient_accumulation_steps" if accumulation > 1 else "training.micro_batch_size"
    most = max(1, records // (ranks * (mbs if accumulation > 1 else 1)))
    return [{"severity": "error", "code": "value-out-of-range", "path": key,
             "value": accumulation if accumulation > 1 else mbs,
             "message": f"one optimizer step takes {need} samples ({ranks} data-parallel rank(s) of {script} × "
                        f"training.micro_batch_size {mbs} × training.gradient_accumulation_steps {accumulation}), but "
                        f"the dataset {config} trains on holds {records} record(s): every step repeats samples and "
                        f"an epoch is less than one step; lower {key} in {config} to at most {most} (or train on "
                        f"more records)",
             "maximum": most}]


# what makes two checkpoints one model: its kind and the sizes every weight's shape follows (top level or text_config)
_IDENTITY = ("model_type", "architectures")
_SIZES = ("hidden_size", "num_hidden_layers", "vocab_size", "intermediate_size", "num_attention_heads")


def _model_facts(folder: Path) -> dict[str, Any] | None:
    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(cfg, dict):
        return None
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    facts = {k: cfg.get(k) for k in _IDENTITY if cfg.get(k) is not None}
    facts.update({k: text.get(k, cfg.get(k)) for k in _SIZES if text.get(k, cfg.get(k)) is not None})
    return facts


def other_model_findings(cfg: dict[str, Any], paths: tuple[tuple[str, ...], ...], target: Path, source: Path,
                         config: str) -> list[dict[str, Any]]:
    """Folders the delivered YAML reads a model from (the model, the processor, ``training.load``) that hold another
    model than the source this run verified: a config.json whose kind or sizes differ (a folder left from the
    recipe the YAML was copied from, another size of the family). The gates read the bound copy, which points at the
    source, so only this sees where the user's launch would load from. A folder that is not here is another check's
    (``hub_name_findings``) or another machine's. ``paths``: the key paths of the YAML that name such folders."""
    want = _model_facts(Path(source))
    if not cfg or not want:
        return []
    out = []
    for keys in paths:
        value: Any = cfg
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if not isinstance(value, str) or not value.strip():
            continue
        folder = Path(value) if Path(value).is_absolute() else Path(target) / value
        try:
            if not folder.is_dir() or folder.resolve() == Path(source).resolve():
                continue
        except OSError:
            continue
        have = _model_facts(folder)
        differ = {k: (have.get(k), v) for k, v in want.items() if have is not None and k in have and have[k] != v}
        if differ:
            said = "; ".join(f"{k} {a!r} where the source has {b!r}" for k, (a, b) in list(differ.items())[:4])
            out.append({"severity": "error", "code": "value-out-of-range", "path": ".".join(keys), "value": value,
                        "message": f"{'.'.join(keys)}: {value} holds another model than the source this run "
                                   f"verified ({source}): {said}; the user's launch would load it; set "
                                   f"{'.'.join(keys)} in {config} to the source's folder"})
    return out


# keys whose value is a folder the trainer writes into (checkpoints, the dataset cache, logs)
WRITTEN_FOLDERS = ("save", "save_dir", "save_path", "output_dir", "cache_dir", "log_dir", "logging_dir",
                   "tensorboard_dir")


def _written_folders(node: Any, path: str = "") -> list[tuple[str, str]]:
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            dotted = f"{path}.{key}" if path else str(key)
            if key in WRITTEN_FOLDERS and isinstance(value, str) and value.strip() and "$" not in value:
                out.append((dotted, value.strip()))
            else:
                out += _written_folders(value, dotted)
    return out


def written_folder_findings(cfg: dict[str, Any], target: Path, config: str) -> list[dict[str, Any]]:
    """Folders the YAML has the trainer write to (module docstring) that this host cannot create or write: a
    relative one resolves against the target root, where the launch runs."""
    out = []
    for key, value in _written_folders(cfg):
        folder = Path(value).expanduser()
        folder = folder if folder.is_absolute() else Path(target) / folder
        nearest = next((p for p in (folder, *folder.parents) if p.exists()), None)
        if nearest is None:
            continue
        if not nearest.is_dir():
            why = f"{nearest} is a file, so the folder cannot be made"
        elif not os.access(nearest, os.W_OK | os.X_OK):
            why = (f"{nearest}, the nearest part of it that exists, is not writable here (a read-only mount, or "
                   f"another user's folder)")
        else:
            continue
        out.append({"severity": "error", "code": "output-folder-unwritable", "path": key, "value": value,
                    "message": f"{key} is {value!r}, a folder the trainer writes into, but {why}: the user's training "
                               f"fails where it first writes there (a checkpoint, the dataset cache); set {key} in "
                               f"{config} to a folder this host can create"})
    return out


def log_interval_findings(cfg: dict[str, Any], config: str) -> list[dict[str, Any]]:
    """``training.log_interval`` above ``training.train_iters``: the trainer prints an iteration's line (its loss,
    its step time) every ``log_interval`` iterations, so a run shorter than that never reports one."""
    training = _section(cfg, "training")
    every, iters = _int(training.get("log_interval")), _int(training.get("train_iters"))
    if not every or not iters or every <= iters:
        return []
    return [{"severity": "error", "code": "value-out-of-range", "path": "training.log_interval", "value": every,
             "message": f"training.log_interval is {every}, but the run trains training.train_iters {iters} "
                        f"iteration(s): no iteration line — no loss, no step time — is ever printed; set "
                        f"training.log_interval in {config} to at most {iters}", "maximum": iters}]
