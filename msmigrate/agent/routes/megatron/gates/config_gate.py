"""Megatron route, config gate: the model JSON and its launch script checked statically against the target's own
code (registered model ids, the framework's argument definitions) and the source's config.json (parallel sizes
against heads / query groups / layers, batch arithmetic, sizes copied from the wrong model). Passes only when the
check ran and found no problem; flags no definition file covers are listed, not failed.

Plan keys (agent/routes/megatron/plan.py): ``model_json_path`` and ``script_path`` (relative to the target), ``entry``
(default pretrain_vlm.py). ``deps.ctx.source`` is the HF folder the JSON describes. The record also carries the
weight conversion the script's ``--load`` needs (tools/megatron/convert_command.py: the target's converter command
with the delivered per-stage layers and TP), which the report hands the user to run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.tools.megatron.config_check import ENTRY, check_megatron_config
from msmigrate.tools.megatron.convert_command import conversion_command


def megatron_config_record(target: Path, model_json: str, script: str, source: Path | None,
                           entry: str = ENTRY) -> dict[str, Any]:
    """The gate's record from plain paths (what gate_megatron_config calls; usable without a run state)."""
    t0 = time.time()
    res = check_megatron_config(target, model_json, script, source=source, entry=entry)
    problems = [res.error] if res.error else res.problems
    ev = evidence_item("megatron config check", ["check_megatron_config", model_json, script],
                       0 if not problems else 1, t0, time.time(), "\n".join(problems + res.warnings),
                       {"facts": res.facts, "unverified_flags": res.unverified_flags, "warnings": res.warnings})
    facts = res.facts
    ok_summary = (f"{model_json} + {script}: model ids {facts.get('model_ids')} registered; sizes "
                  f"{facts.get('sizes')} fit the model (dp={facts.get('dp')}, grad accumulation "
                  f"{facts.get('grad_accum')}); {len(res.unverified_flags)} flag(s) outside the definitions read")
    return {"gate": "G3", "backend": "megatron", "passed": not problems,
            "summary": "; ".join(problems[:5]) or ok_summary, "evidence": [ev], "failure_text": "\n".join(problems)}


def with_conversion(rec: dict[str, Any], target: Path, plan: dict[str, Any], source: Path) -> dict[str, Any]:
    """The weight conversion the delivered script's ``--load`` needs, as the exact command (the report shows it):
    a script that loads nothing, or loads another folder than the conversion writes, fails the gate."""
    conv = conversion_command(target, plan.get("converter"), plan["model_json_path"], plan["script_path"], source,
                              int((plan.get("parallel") or {}).get("tp") or 1), plan.get("converter_output"))
    rec = {**rec, "conversion": conv.to_dict()}
    if conv.problems:
        rec.update(passed=False, summary="; ".join(conv.problems) if rec["passed"] else
                   f"{rec['summary']}; {'; '.join(conv.problems)}",
                   failure_text="\n".join(t for t in (rec.get("failure_text"), *conv.problems) if t))
    elif rec["passed"] and conv.command:
        rec["summary"] += f"; the script loads {conv.mm_dir}, made by: {conv.command}"
    return rec


def gate_megatron_config(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    plan, ctx = state["plan"], deps.ctx
    rec = megatron_config_record(ctx.target, plan["model_json_path"], plan["script_path"], ctx.source,
                                 plan.get("entry") or ENTRY)
    return with_conversion(rec, ctx.target, plan, ctx.source)
