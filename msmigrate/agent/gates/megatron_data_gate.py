"""Megatron route, data gate (slot G2): the delivered data JSON that pretrain_vlm.py's
``train_valid_test_datasets_provider`` reads, checked statically against the files it names and the model it feeds.

Passes only when each check ran on the delivered file: the JSON has ``dataset_param`` with a ``dataset_type``;
``model_name_or_path`` is an HF folder (config.json) — the processor the dataset loads; ``dataset`` is a non-empty
JSON list whose image paths resolve; and the batch ``get_batch`` hands to the model (``model(**batch)``) fits the
assembled model's forward: the source processor's outputs (measured in the plan) each have a parameter, or the
forward takes ``**kwargs`` (then the unconsumed ones are named as ignored). What it does not prove: that the
framework's dataset renders the samples the way the source's chat template does (the real dataset runs on the
accelerator machine's environment; the FSDP2 route's G2 parity has no Megatron counterpart yet)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item


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


def gate_megatron_data(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    plan = state["plan"]
    data_json = (plan.get("megatron") or {}).get("data_json") or plan.get("data_json_path")
    t0 = time.time()
    problems, warnings, facts = check_data_json(deps.ctx.target, data_json, plan.get("batch_contract") or {})
    ev = evidence_item("megatron data JSON check", ["check_data_json", data_json], 0 if not problems else 1, t0,
                       time.time(), "\n".join(problems + warnings), {"facts": facts, "warnings": warnings})
    ok = (f"{data_json}: dataset_type {facts.get('dataset_type')}, {facts.get('records')} records, "
          f"{facts.get('images')} images resolve; get_batch passes {facts.get('consumed')} to the model"
          + (f"; {'; '.join(warnings)}" if warnings else ""))
    return {"gate": "G2", "backend": "megatron", "passed": not problems, "summary": "; ".join(problems[:5]) or ok,
            "evidence": [ev], "failure_text": "\n".join(problems)}
