"""Megatron route, converter gate: HF -> Megatron layout -> HF on a tiny model, same tensors after the round trip.

The target's own converter runs where it can (tools/megatron/converter_roundtrip.py: its operators, TP split and
PP partition, as shipped). When it cannot even be imported in this runtime, msmigrate's own layout round trip
(weight_roundtrip.py: fused QKV by KV group, gate+up stacked, with the source's head counts) runs instead, and the
record says which one ran (``converter_used``): the fallback proves the layout convention, not the target's code.

Plan keys (all optional): ``converter`` (class name in the target's checkpoint/ tree; default: the converter
whose file imports the source's ``model_type`` config module, tools/megatron/converters.py),
``converter_tiny_config`` (a config.json dict of a tiny model) or ``converter_hf_dir`` (a small HF folder, relative
to the target) - default: the source's own config.json shrunk to 2 layers per stack and a 512 vocabulary -,
``converter_tp`` / ``converter_pp`` / ``converter_vpp`` (default 1: the layout itself; G1 sets the launch's TP and PP sizes, so the
per-rank, per-stage shards the launch would load are the ones round-tripped), ``converter_llm_pp_layers`` /
``converter_vit_pp_layers`` (explicit per-stage layer counts instead of ``converter_pp``), ``encoder_taps`` (the
source's per-layer mergers and the encoder attribute they land on: each must reach its tower layer's tap).
No converter named and none found: msmigrate's own layout round trip with the source's head counts, and the
record says so (``converter_used: msmigrate``; a new architecture needs a converter the migration writes).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.tools.megatron.converter_roundtrip import target_converter_roundtrip
from msmigrate.tools.megatron.converters import converter_candidates
from msmigrate.tools.megatron.weight_roundtrip import converter_roundtrip


def megatron_converter_record(runtime_python: str, target: Path, converter: str, work_dir: Path, *,
                              source: Path | None = None, tiny_config: dict | None = None,
                              hf_dir: Path | None = None, shrink_source: Path | None = None, tp: int = 1,
                              pp: int = 1, vpp: int = 1, llm_pp_layers: list | None = None,
                              vit_pp_layers: list | None = None, taps: dict | None = None,
                              probe_timeout: float = 300.0) -> dict[str, Any]:
    t0 = time.time()
    res = target_converter_roundtrip(runtime_python, target, converter, work_dir, hf_dir=hf_dir,
                                     tiny_config=tiny_config, shrink_source=shrink_source, tp=tp, pp=pp,
                                     vpp=vpp, llm_pp_layers=llm_pp_layers,
                                     vit_pp_layers=vit_pp_layers, taps=taps,
                                     timeout=max(600.0, probe_timeout))  # a converter run: its own 600 s floor
    evidence = [evidence_item("target converter round trip", ["megatron_converter_roundtrip", converter],
                              0 if res.ok else 1, t0, time.time(), res.error or "\n".join(res.problems),
                              {"ran": res.ran, "stubbed": res.stubbed, **res.facts})]
    used, problems = "target", ([res.error] if res.error else res.problems)
    if res.error and res.facts.get("missing_module"):
        t1 = time.time()
        own = converter_roundtrip(runtime_python, source, tp=tp, timeout=probe_timeout)
        evidence.append(evidence_item("msmigrate layout round trip (fallback)", ["megatron_qkv_roundtrip"],
                                      0 if own.ok else 1, t1, time.time(), own.error or "\n".join(own.problems),
                                      own.facts))
        used = "msmigrate"
        problems = [own.error] if own.error else own.problems
    if used == "target" and not problems and not res.facts.get("qkv_layers_checked"):
        # the probe names this itself; kept here too so a probe from an older target runtime cannot pass on nothing
        problems = ["linear_qkv order checked on 0 layers: the per-KV-group order of the fused QKV was not read"]
    passed = not problems
    if used == "target" and passed:
        f = res.facts
        summary = (f"{converter}: {f.get('hf_tensors')} HF tensors -> Megatron ({f.get('megatron_files')} file(s), "
                   f"tp={f.get('tp')}, pp layers {f.get('llm_pp_layers')}) -> HF, all identical; linear_qkv order "
                   f"checked on {f.get('qkv_layers_checked')} layer(s) at each of {f.get('tp')} TP rank(s)"
                   + (f"; VPP layout: {f.get('vpp_stages_checked')} virtual stage(s) in {f.get('vpp_files')} "
                      "file(s) put back equal the single-stage checkpoint" if f.get("vpp_stages_checked") else "")
                   + (f"; per-layer mergers on their tower layers' {taps['attr']} ({f.get('tap_matrices_checked')} "
                      "matrices found by value)" if taps else "")
                   + (f"; stubbed: {'; '.join(res.stubbed)}" if res.stubbed else ""))
    elif passed:
        summary = (f"target converter not importable here ({res.error}); msmigrate's own layout round trip passed "
                   "(layout convention only, not the target's converter)")
    else:
        summary = "; ".join(problems[:4])
    return {"gate": "converter", "backend": "megatron", "passed": passed, "converter_used": used,
            "summary": summary, "evidence": evidence, "failure_text": "\n".join(problems)}


def own_layout_record(runtime_python: str, source: Path | None, why: str, tp: int = 1, *,
                      probe_timeout: float = 300.0) -> dict[str, Any]:
    """msmigrate's layout round trip (fused QKV by KV group, gate+up) with the source's head counts, saying why the
    target's converter did not run."""
    t0 = time.time()
    own = converter_roundtrip(runtime_python, source, tp=tp, timeout=probe_timeout)
    problems = [own.error] if own.error else own.problems
    ev = evidence_item("msmigrate layout round trip", ["megatron_qkv_roundtrip"], 0 if not problems else 1, t0,
                       time.time(), "\n".join(problems), own.facts)
    summary = "; ".join(problems[:4]) or (
        f"{why}: msmigrate's layout round trip with the source's heads ({own.facts.get('heads')} heads, "
        f"{own.facts.get('kv_heads')} KV heads) is bit-identical (layout convention only, not a converter)")
    return {"gate": "converter", "backend": "megatron", "passed": not problems, "converter_used": "msmigrate",
            "summary": summary, "evidence": [ev], "failure_text": "\n".join(problems)}


def gate_megatron_converter(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    plan, ctx = state["plan"], deps.ctx
    converter = plan.get("converter") or converter_candidates(ctx.target, plan.get("model_type")).best
    if not converter:
        return own_layout_record(ctx.runtime_python, ctx.source,
                                 f"no weight converter for model_type {plan.get('model_type')!r} in the target (the "
                                 "plan names none, no checkpoint/ converter imports that config module)",
                                 tp=plan.get("converter_tp", 1), probe_timeout=ctx.probe_timeout_s)
    hf_dir, tiny = plan.get("converter_hf_dir"), plan.get("converter_tiny_config")
    return megatron_converter_record(
        ctx.runtime_python, ctx.target, converter, ctx.run_dir / "megatron_converter", source=ctx.source,
        tiny_config=tiny, hf_dir=ctx.target / hf_dir if hf_dir else None,
        shrink_source=ctx.source if not (hf_dir or tiny) else None, tp=plan.get("converter_tp", 1),
        pp=plan.get("converter_pp", 1), vpp=plan.get("converter_vpp", 1),
        llm_pp_layers=plan.get("converter_llm_pp_layers"), vit_pp_layers=plan.get("converter_vit_pp_layers"),
        taps=plan.get("encoder_taps"), probe_timeout=ctx.probe_timeout_s)
