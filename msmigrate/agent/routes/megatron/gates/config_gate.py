"""Megatron route, config gate: the model JSON and its launch script checked statically against the target's own
code (registered model ids, the framework's argument definitions) and the source's config.json (parallel sizes
against heads / query groups / layers, batch arithmetic, sizes copied from the wrong model). Passes only when the
check ran and found no problem; flags no definition file covers are listed, not failed.

Plan keys (agent/routes/megatron/plan.py): ``model_json_path`` and ``script_path`` (relative to the target), ``entry``
(default pretrain_vlm.py). ``deps.ctx.source`` is the HF folder the JSON describes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.tools.megatron.config_check import ENTRY, check_megatron_config


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


def gate_megatron_config(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    plan, ctx = state["plan"], deps.ctx
    return megatron_config_record(ctx.target, plan["model_json_path"], plan["script_path"], ctx.source,
                                  plan.get("entry") or ENTRY)
