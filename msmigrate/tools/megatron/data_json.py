"""The Megatron route's data JSON (what pretrain_vlm.py's ``train_valid_test_datasets_provider`` reads,
``--mm-data``), checked statically: the files it names and the batch ``get_batch`` hands the model. One core for
gate G2 of the route (agent/routes/megatron/gates/data_gate.py) and the LLM policy's ``check_megatron_data`` tool, so the
tool answers what the gate will."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _resolve(target: Path, value: Any, base: Path | None = None) -> Path | None:
    if not isinstance(value, str) or not value:
        return None
    p = Path(value)
    return p if p.is_absolute() else (base or target) / p


def _image_paths(records: list[Any]) -> list[str]:
    out = []
    for r in records:
        images = r.get("images") if isinstance(r, dict) else None
        out += [i for i in (images if isinstance(images, list) else [images] if images else []) if isinstance(i, str)]
    return out


def check_data_json(target: Path, data_json: str, contract: dict[str, Any]) -> tuple[list[str], list[str], dict]:
    """(problems, warnings, facts) for the delivered data JSON."""
    problems, warnings, facts = [], [], {}
    try:
        doc = json.loads((Path(target) / data_json).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"cannot read {data_json}: {exc}"], [], facts
    ds = doc.get("dataset_param") if isinstance(doc, dict) else None
    if not isinstance(ds, dict):
        return [f"{data_json} has no dataset_param section"], [], facts
    facts["dataset_type"] = ds.get("dataset_type")
    if not ds.get("dataset_type"):
        problems.append("dataset_param.dataset_type is not set")
    pre, basic = ds.get("preprocess_parameters") or {}, ds.get("basic_parameters") or {}
    model_dir = _resolve(target, pre.get("model_name_or_path"))
    if model_dir is None or not (model_dir / "config.json").is_file():
        problems.append(f"preprocess_parameters.model_name_or_path {pre.get('model_name_or_path')!r} is not an HF "
                        "folder with config.json")
    data = _resolve(target, basic.get("dataset"))
    records = None
    if data is None:
        problems.append("basic_parameters.dataset is not set")
    else:
        try:
            records = json.loads(data.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"basic_parameters.dataset {basic.get('dataset')!r}: {exc}")
    if data is None or records is None:
        pass
    elif not isinstance(records, list) or not records:
        problems.append(f"{basic.get('dataset')} holds no records (a JSON list expected)")
    elif isinstance(records, list):
        facts["records"] = len(records)
        base = _resolve(target, basic.get("dataset_dir")) or data.parent
        images = _image_paths(records)
        missing = [i for i in images if not (_resolve(target, i, base) or Path(i)).is_file()
                   and not (data.parent / i).is_file()]
        facts["images"], facts["images_missing"] = len(images), missing[:5]
        if missing:
            problems.append(f"{len(missing)} of {len(images)} image paths do not resolve (e.g. {missing[0]})")
    if contract.get("error"):
        problems.append(f"get_batch contract not established: {contract['error']}")
    elif contract:
        facts["consumed"], gap = contract.get("consumed"), contract.get("not_consumed") or []
        if gap and not contract.get("takes_kwargs"):
            problems.append(f"{contract.get('forward')} has no parameter for {gap}, which the batch carries: "
                            "model(**batch) raises TypeError")
        elif gap:
            warnings.append(f"{contract.get('forward')} takes no {gap}: get_batch passes them into **kwargs, unused")
    else:
        problems.append("the plan has no get_batch contract")
    return problems, warnings, facts
