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

import time
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.tools.megatron.data_json import check_data_json

__all__ = ["check_data_json", "gate_megatron_data"]


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
