"""The Megatron route's gates per graph slot, composed from the route's gates (imports, converter, config, data,
training) so that the same G1..G6 order holds on both routes.

- G1 model: the weight converter round trip (the target's converter the plan chose, on a tiny model from the
  source's config; when the target has none for the source's model_type, msmigrate's own layout round trip, and
  the summary says a converter is still needed) plus the entry's imports. Imports that fail only for modules this
  environment lacks (torch_npu, Megatron-LM) do not fail G1 — the static gates after it still run — they are named
  in the summary, and the training slot reports them as what needs the accelerator. Imports failing in the
  target's own code fail G1.
- G4 functional: where the target runtime builds the real model on this CPU (megatron.core and megatron.training
  import under msmigrate's CPU shim; cpu_step_gate.py), first the delivered weight conversion (the target's converter
  on the source, one rank) and the real step (build by model_provider, strict load, forward parity with the source,
  backward); a failed step fails G4. After a passed step, ``torchrun`` of the real pretrain_vlm.py trains a few
  iterations at TP=1 and TP=2 (gloo) on the CPU (cpu_train_gate.py). Without the preflight (the stand-in, an
  accelerator machine), the delivered launch script (training_gate). When the sizes need model parallelism
  (tp·pp·cp > 1) and the runtime probe found no accelerator, nothing is launched: the record says
  ``needs_accelerator`` with the sizes and the runtime's device (the stand-in, like a CPU box, runs TP=PP=CP=1 only).
- G5 reliability: the same launch again (on the CPU route, G4's TP=1 launch); passes when its losses equal G4's.
- G6 distributed: G4's launch ran ≥ 2 ranks (the delivered script's, or on the CPU route the TP=2 launch); the
  evidence is G4's launch, cited, not a second run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.agent.routes.megatron.gates.converter_gate import gate_megatron_converter
from msmigrate.agent.routes.megatron.gates.cpu_step_gate import cpu_preflight_record, with_preflight
from msmigrate.agent.routes.megatron.gates.cpu_train_gate import (cpu_distributed_record, cpu_reliability_record,
                                                                  cpu_training_record)
from msmigrate.agent.routes.megatron.gates.imports_gate import megatron_imports_record
from msmigrate.agent.routes.megatron.gates.new_projector_gate import new_projector_record
from msmigrate.agent.routes.megatron.gates.training_gate import UNPROVEN_ON_CPU, megatron_training_record
from msmigrate.tools.megatron.component_forward import component_forward
from msmigrate.tools.megatron.encoder_converter import encoder_conversion
from msmigrate.tools.megatron.launch_script import parse_launch_script
from msmigrate.tools.megatron.weight_roundtrip import converter_roundtrip


def _meg(state: dict[str, Any]) -> dict[str, Any]:
    plan = state["plan"]
    return {"entry": "pretrain_vlm.py", **(plan.get("megatron") or {}), "parallel": plan.get("parallel") or {}}


def _device(state: dict[str, Any]) -> str:
    dev = (state.get("runtime") or {}).get("device")
    return str(dev.get("kind") if isinstance(dev, dict) else dev or "unknown")


def new_component_record(runtime_python: str, target: Path, new: dict[str, Any] | None, *,
                         timeout: float = 300.0) -> dict[str, Any] | None:
    """The new encoder the model phase registered, built by its model_id and run once (tools/megatron/
    component_forward.py); a module the environment lacks (torch_npu, megatron) is named, not failed."""
    if not new or not new.get("tables"):
        return None
    t0 = time.time()
    (reg_file, reg), (spec_file, specs) = (new["tables"][k].split(":") for k in ("registry", "specs"))
    res = component_forward(runtime_python, target, registry_file=reg_file, registry=reg, specs_file=spec_file,
                            specs=specs, model_id=new["model_id"], fields=new["json_fields"], timeout=timeout)
    blocked = bool(res.error and res.missing_module and not (Path(target) / res.missing_module).exists())
    problems = [res.error] if res.error else res.problems
    ev = evidence_item(f"new component {new['model_id']} forward", ["megatron_component_forward", new["model_id"]],
                       0 if res.ok else 1, t0, time.time(), "\n".join(p for p in problems if p), res.facts)
    if res.ok:
        summary = (f"new {new['model_id']} builds by model_id and runs a forward: output {res.facts['output_shape']} "
                   "(random weights; not the source's tower numerics)")
    elif blocked:
        summary = f"new {new['model_id']} not built here: it needs {res.missing_module} (the accelerator environment)"
    else:
        summary = f"new {new['model_id']} does not build/run: " + "; ".join(p for p in problems if p)
    return {"passed": res.ok, "needs_accelerator": blocked, "summary": summary, "evidence": [ev],
            "failure_text": "" if res.ok or blocked else "\n".join(p for p in problems if p)}


def new_encoder_converter_record(runtime_python: str, target: Path, source: Path | None, work_dir: Path,
                                 new: dict[str, Any] | None, *, timeout: float = 300.0) -> dict[str, Any] | None:
    """The converter for the new encoder's layout (tools/megatron/encoder_converter.py): the source's tower ->
    the class's state_dict (strict load) -> HF, bit-identical; unmapped HF tensors are named."""
    if not new or not new.get("tables") or source is None:
        return None
    if not sorted(Path(source).glob("*.safetensors")):  # a weight-less source: nothing to convert, said so
        return {"passed": False, "needs_accelerator": False, "not_run": True, "evidence": [], "failure_text": "",
                "converter_used": None, "unmapped_hf": [],
                "summary": f"new {new['model_id']} converter not run: the source has no *.safetensors"}
    t0 = time.time()
    (reg_file, reg), (spec_file, specs) = (new["tables"][k].split(":") for k in ("registry", "specs"))
    res = encoder_conversion(runtime_python, target, source, work_dir, registry_file=reg_file, registry=reg,
                             specs_file=spec_file, specs=specs, model_id=new["model_id"], fields=new["json_fields"],
                             timeout=timeout)
    blocked = bool(res.error and res.missing_module and not (Path(target) / res.missing_module).exists())
    problems = [res.error] if res.error else res.problems + [f"class tensor not filled: {n}"
                                                             for n in res.unfilled_megatron]
    ev = evidence_item(f"new encoder {new['model_id']} converter round trip",
                       ["megatron_encoder_converter", new["model_id"]], 0 if res.ok else 1, t0, time.time(),
                       "\n".join(p for p in problems if p),
                       {**res.facts, "unmapped_hf": res.unmapped_hf, "unfilled_megatron": res.unfilled_megatron})
    f = res.facts
    if res.ok:
        summary = (f"new {new['model_id']} converter (msmigrate's, derived from the class's state_dict): "
                   f"{f.get('mapped_hf')} of {f.get('hf_tower_tensors')} HF tower tensors -> {f.get('megatron_tensors')}"
                   f" {f.get('class')} tensors (strict load) -> HF, all identical"
                   + (f"; {len(res.unmapped_hf)} unmapped (the class has no place for them): "
                      + ", ".join(res.unmapped_hf[:6]) + (" ..." if len(res.unmapped_hf) > 6 else "")
                      if res.unmapped_hf else ""))
    elif blocked:
        summary = f"new {new['model_id']} converter not run here: it needs {res.missing_module} (the accelerator environment)"
    else:
        summary = f"new {new['model_id']} converter failed: " + "; ".join(p for p in problems[:4] if p)
    return {"passed": res.ok, "needs_accelerator": blocked, "summary": summary, "evidence": [ev],
            "converter_used": f"msmigrate_encoder:{new['model_id']}", "unmapped_hf": res.unmapped_hf,
            "failure_text": "" if res.ok or blocked else "\n".join(p for p in problems if p)}


def gate_megatron_model(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    plan, ctx, meg = state["plan"], deps.ctx, _meg(state)
    if plan.get("converter"):
        # the launch's TP x PP (the shards and stages the launch would load): the converter's lossless
        # HF -> Megatron -> HF round trip, the text layers spread over the stages, the encoder on the first
        tp = int(meg["parallel"].get("tp") or plan.get("converter_tp") or 1)
        pp = int(meg["parallel"].get("pp") or 1)
        vpp = int(meg["parallel"].get("vpp") or 1)
        at_launch = {**plan, "converter_tp": tp, "converter_pp": pp, "converter_vpp": vpp,
                     "converter_llm_pp_layers": None, "converter_vit_pp_layers": None}
        conv = gate_megatron_converter(deps, {**state, "plan": at_launch})
        conv = {**conv, "summary": f"{conv.get('summary', '')} (tp={tp}, pp={pp}, vpp={vpp})"}
    else:
        t0 = time.time()
        own = converter_roundtrip(ctx.runtime_python, ctx.source, tp=int(meg["parallel"].get("tp") or 1),
                                  timeout=ctx.probe_timeout_s)
        problems = [own.error] if own.error else own.problems
        conv = {"passed": not problems, "converter_used": "msmigrate",
                "summary": "; ".join(problems[:4]) or (
                    f"the target has no weight converter for model_type {plan.get('model_type')!r} (training on "
                    f"the real weights needs one); msmigrate's layout round trip with the source's heads "
                    f"({own.facts.get('heads')} heads, {own.facts.get('kv_heads')} KV heads, per-group order on "
                    f"each of {own.facts.get('tp')} TP rank(s)) is bit-identical "
                    "(layout convention only, not the target's converter)"),
                "evidence": [evidence_item("msmigrate layout round trip", ["megatron_qkv_roundtrip"],
                                           0 if not problems else 1, t0, time.time(), "\n".join(problems),
                                           own.facts)], "failure_text": "\n".join(problems)}
    enc = new_encoder_converter_record(ctx.runtime_python, ctx.target, ctx.source, ctx.run_dir / "encoder_converter",
                                       plan.get("new_component"), timeout=ctx.probe_timeout_s)
    if enc is not None:  # the new encoder's layout has its own converter; the decoder's round trip stays as it was
        conv = {**conv, "passed": bool(conv["passed"]) and (enc["passed"] or enc["needs_accelerator"] or enc.get("not_run")),
                "encoder_converter_used": enc["converter_used"], "encoder_unmapped_hf": enc["unmapped_hf"],
                "summary": f"{conv['summary']}; {enc['summary']}",
                "evidence": list(conv.get("evidence") or []) + enc["evidence"],
                "failure_text": "\n".join(t for t in (conv.get("failure_text"), enc["failure_text"]) if t)}
    imports = megatron_imports_record(ctx.runtime_python, ctx.target, meg["entry"], timeout=ctx.probe_timeout_s)
    new = new_component_record(ctx.runtime_python, ctx.target, plan.get("new_component"), timeout=ctx.probe_timeout_s)
    if new is not None:  # the component the model phase wrote counts with the entry's own code
        imports = {**imports, "passed": imports["passed"] and new["passed"],
                   "needs_accelerator": imports.get("needs_accelerator") or new["needs_accelerator"],
                   "summary": f"{imports['summary']}; {new['summary']}",
                   "evidence": imports["evidence"] + new["evidence"],
                   "failure_text": "\n".join(t for t in (imports["failure_text"], new["failure_text"]) if t)}
    proj = new_projector_record(ctx.runtime_python, ctx.target, ctx.source, ctx.run_dir / "projector_converter", plan,
                                timeout=ctx.probe_timeout_s)
    if proj is not None:  # the new projector's converter and its forward behind the encoder count with G1's code
        imports = {**imports, "passed": imports["passed"] and proj["passed"],
                   "needs_accelerator": imports.get("needs_accelerator") or proj["needs_accelerator"],
                   "summary": f"{imports['summary']}; {proj['summary']}",
                   "evidence": imports["evidence"] + proj["evidence"],
                   "failure_text": "\n".join(t for t in (imports["failure_text"], proj["failure_text"]) if t)}
        conv = {**conv, "projector_converter_used": proj["projector_converter_used"],
                "projector_unmapped_hf": proj["projector_unmapped_hf"]}
    own_code = not imports["passed"] and not imports.get("needs_accelerator")
    passed = bool(conv["passed"]) and not own_code
    parts = [conv["summary"], imports["summary"] + (" (checked again by the training slot)"
                                                    if imports.get("needs_accelerator") else "")]
    return {"gate": "G1", "backend": "megatron", "passed": passed, "converter_used": conv.get("converter_used"),
            **{k: conv[k] for k in ("encoder_converter_used", "encoder_unmapped_hf", "projector_converter_used",
                                    "projector_unmapped_hf") if k in conv},
            "summary": "; ".join(parts), "evidence": list(conv.get("evidence") or []) + imports["evidence"],
            "failure_text": "\n".join(t for t in (conv.get("failure_text"), imports["failure_text"] if own_code
                                                  else "") if t)}


def _launch_record(ctx: Any, meg: dict[str, Any], device: str) -> dict[str, Any]:
    par = meg["parallel"]
    model_parallel = par.get("tp", 1) * par.get("pp", 1) * par.get("cp", 1)
    if model_parallel > 1 and device in ("cpu", "unknown"):
        why = (f"tp {par.get('tp', 1)} x pp {par.get('pp', 1)} x cp {par.get('cp', 1)} needs model-parallel "
               f"Megatron on an accelerator; the target runtime's device is {device}")
        return {"gate": "G4", "backend": "megatron", "passed": False, "needs_accelerator": why,
                "not_proven": list(UNPROVEN_ON_CPU), "summary": f"not launched: {why}", "evidence": [],
                "failure_text": "", "launches": 0}
    rec = megatron_training_record(ctx.runtime_python, ctx.target, meg["script_path"], entry=meg["entry"])
    return {**rec, "gate": "G4", "launches": 0 if rec.get("needs_accelerator") else 1}


def gate_megatron_functional(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    """Where the target runtime builds the real model on this CPU, the delivered conversion and the real step run
    first (cpu_step_gate.py); a failed step fails the slot without launching. Then the launch as before."""
    ctx, meg, device = deps.ctx, _meg(state), _device(state)
    # on an accelerator the launch itself runs; the preflight is what a CPU box can do instead
    pre = cpu_preflight_record(ctx.runtime_python, ctx.target, ctx.source, {**state["plan"], "megatron": meg},
                               ctx.run_dir / "cpu_preflight", probe_timeout=ctx.probe_timeout_s
                               ) if device in ("cpu", "unknown") else None
    if pre is not None and not pre["passed"]:
        return {**pre, "gate": "G4", "launches": 0, "cpu_preflight": {k: pre[k] for k in (
            "readiness", "conversion_run", "real_step", "summary") if k in pre}}
    if pre is None:
        return _launch_record(ctx, meg, device)
    # the model builds here: the real pretrain_vlm.py trains under torchrun on the CPU (TP=1 and TP=2)
    launch = cpu_training_record(ctx.runtime_python, ctx.target, ctx.source, {**state["plan"], "megatron": meg}, pre,
                                 ctx.run_dir / "cpu_preflight")
    return with_preflight(pre, launch, meg["script_path"])


def _losses(rec: dict[str, Any]) -> list[float]:
    for ev in reversed(rec.get("evidence") or []):
        if (ev.get("metrics") or {}).get("losses"):
            return list(ev["metrics"]["losses"])
    return []


def gate_megatron_reliability(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    ctx, meg = deps.ctx, _meg(state)
    g4 = (state.get("gates") or {}).get("G4") or {}
    if g4.get("cpu_launches"):  # G4 trained on the CPU: the same CPU launch again
        return cpu_reliability_record(ctx.runtime_python, ctx.target, {**state["plan"], "megatron": meg}, g4)
    first = _losses(g4)
    rec = megatron_training_record(ctx.runtime_python, ctx.target, meg["script_path"], entry=meg["entry"])
    again = _losses(rec)
    problems = [] if rec["passed"] else [rec["summary"]]
    if rec["passed"] and (not first or again != first):
        problems.append(f"same seed, different losses: G4 {first[:5]} vs now {again[:5]}")
    return {**rec, "gate": "G5", "passed": not problems, "launches": 1,
            "summary": "; ".join(problems) or f"same seed → the same {len(again)} losses as G4",
            "failure_text": "\n".join(problems)}


def gate_megatron_distributed(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    meg, g4 = _meg(state), (state.get("gates") or {}).get("G4") or {}
    if g4.get("cpu_launches"):
        return cpu_distributed_record(g4)
    script = parse_launch_script((Path(deps.ctx.target) / meg["script_path"]).read_text(encoding="utf-8"))
    ranks = script.launcher_args.get("--nproc_per_node")
    try:
        world = int(ranks) * int(script.launcher_args.get("--nnodes") or 1)
    except (TypeError, ValueError):
        world = None
    problems = []
    if not g4.get("passed"):
        problems.append("G4's launch did not pass")
    if world is None or world < 2:
        problems.append(f"the delivered script launches {world} rank(s); distributed needs >= 2")
    return {"gate": "G6", "backend": "megatron", "passed": not problems,
            "summary": "; ".join(problems) or f"G4's launch of {meg['script_path']} ran {world} ranks (cited)",
            "evidence": list(g4.get("evidence") or []), "failure_text": "\n".join(problems)}
