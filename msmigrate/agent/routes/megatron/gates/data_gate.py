"""Megatron route, data gate (slot G2): the delivered data JSON that pretrain_vlm.py's
``train_valid_test_datasets_provider`` reads, checked against the files it names, the model it feeds and the
source's own chat format.

Passes only when each check ran on the delivered file: the JSON has ``dataset_param`` with a ``dataset_type``;
``model_name_or_path`` is an HF folder (config.json) — the processor the dataset loads; ``dataset`` is a non-empty
JSON list whose image paths resolve; the batch ``get_batch`` hands to the model (``model(**batch)``) fits the
assembled model's forward: the source processor's outputs (measured in the plan) each have a parameter, or the
forward takes ``**kwargs`` (then the unconsumed ones are named as ignored); and data parity with the source: the
template the data JSON names, read from the target's registry, renders the samples' turns as the source's own chat
template does (tools/megatron/template_parity.py; a ChatML template for a ``USER: … ASSISTANT:`` model fails here).
A template the target does not register, or a comparison that could not run, fails the gate: the format is then
unproven, not assumed. What it does not prove: the token ids after the framework's media expansion and its label
mask (the real dataset computes those): G4's CPU preflight compares get_batch's batch with the source's own processor
(tools/megatron/probes/_batch_data_parity.py)."""

from __future__ import annotations

import time
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.tools.megatron.data_json import check_data_json
from msmigrate.tools.megatron.template_parity import template_parity

__all__ = ["check_data_json", "gate_megatron_data", "megatron_data_record"]


def megatron_data_record(runtime_python: str, target: Any, source: Any, data_json: str,
                         contract: dict[str, Any], *, timeout: float = 300.0) -> dict[str, Any]:
    t0 = time.time()
    problems, warnings, facts = check_data_json(target, data_json, contract)
    ev = evidence_item("megatron data JSON check", ["check_data_json", data_json], 0 if not problems else 1, t0,
                       time.time(), "\n".join(problems + warnings), {"facts": facts, "warnings": warnings})
    t1 = time.time()
    par = template_parity(runtime_python, target, data_json, source, timeout=timeout)
    parity_problems = [f"data parity not proven: {par.error}"] if par.error else [
        f"data parity: {p}" for p in par.problems]
    ev_parity = evidence_item("megatron template parity (source chat template vs the data JSON's template)",
                              ["megatron_template_parity", data_json], 0 if not parity_problems else 1, t1,
                              time.time(), "\n".join(parity_problems), par.facts)
    problems += parity_problems
    f = par.facts
    ok = (f"{data_json}: dataset_type {facts.get('dataset_type')}, {facts.get('records')} records, "
          f"{facts.get('images')} images resolve; get_batch passes {facts.get('consumed')} to the model; template "
          f"{f.get('template')!r} ({f.get('registered_in')}) renders {f.get('turns_compared')} turn(s) of "
          f"{f.get('samples_compared')} sample(s) as the source's chat template does (text around the answers; "
          "the ids after media expansion and the label mask are compared by G4's CPU preflight on get_batch's "
          "batch, where the runtime builds the model)"
          + (f"; {'; '.join(warnings)}" if warnings else ""))
    return {"gate": "G2", "backend": "megatron", "passed": not problems, "summary": "; ".join(problems[:5]) or ok,
            "evidence": [ev, ev_parity], "failure_text": "\n".join(problems), "data_parity": par.to_dict()}


def gate_megatron_data(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    plan, ctx = state["plan"], deps.ctx
    data_json = (plan.get("megatron") or {}).get("data_json") or plan.get("data_json_path")
    return megatron_data_record(ctx.runtime_python, ctx.target, ctx.source, data_json,
                                plan.get("batch_contract") or {}, timeout=ctx.probe_timeout_s)
