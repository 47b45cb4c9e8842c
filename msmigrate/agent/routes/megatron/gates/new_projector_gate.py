"""G1's evidence for a NEW vision projector the model phase registered (agent/routes/megatron/new_projector.py): its
converter (the source's projector tensors -> the class's state_dict, strict load, back to HF bit-identical;
tools/megatron/projector_converter.py) and one forward behind the encoder, both built by model_id from the target's
registries (tools/megatron/projector_forward.py): the output must be as wide as the text decoder. A module the
environment lacks (torch_npu, megatron) is named, not failed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.tools.megatron.projector_converter import projector_conversion
from msmigrate.tools.megatron.projector_forward import projector_forward


def _blocked(target: Path, res: Any) -> bool:
    return bool(res.error and res.missing_module and not (Path(target) / res.missing_module).exists())


def new_projector_record(runtime_python: str, target: Path, source: Path | None, work_dir: Path,
                         plan: dict[str, Any], *, timeout: float = 300.0) -> dict[str, Any] | None:
    new = plan.get("new_projector")
    if not new or not new.get("tables"):
        return None
    reg_file, reg = new["tables"]["registry"].split(":")
    summaries, evidence, failures, blocked_by = [], [], [], None
    t0 = time.time()
    conv = projector_conversion(runtime_python, target, source, work_dir, registry_file=reg_file, registry=reg,
                                model_id=new["model_id"], fields=new["json_fields"], layout=new["layout"],
                                root=new["root"], timeout=timeout) if source is not None else None
    if conv is not None:
        problems = [conv.error] if conv.error else conv.problems + [f"class tensor not filled: {n}"
                                                                    for n in conv.unfilled_megatron]
        evidence.append(evidence_item(f"new projector {new['model_id']} converter round trip",
                                      ["megatron_projector_converter", new["model_id"]], 0 if conv.ok else 1, t0,
                                      time.time(), "\n".join(p for p in problems if p),
                                      {**conv.facts, "unmapped_hf": conv.unmapped_hf}))
        f = conv.facts
        if conv.ok:
            summaries.append(f"new {new['model_id']} converter (msmigrate's, from the design's layout checked against "
                             f"the class): {f.get('mapped_hf')} of {f.get('hf_projector_tensors')} HF projector "
                             f"tensors -> {f.get('megatron_tensors')} {f.get('class')} tensors (strict load, ops "
                             f"{f.get('ops')}) -> HF, all identical"
                             + (f"; unmapped: {', '.join(conv.unmapped_hf)}" if conv.unmapped_hf else ""))
        elif _blocked(target, conv):
            blocked_by = conv.missing_module
        else:
            failures += [p for p in problems if p]
            summaries.append(f"new {new['model_id']} converter failed: " + "; ".join(problems[:4]))
    enc = plan.get("new_component") or {}
    text_hidden = new["json_fields"]["hidden_size"]
    if enc.get("tables"):
        t0 = time.time()
        fwd = projector_forward(runtime_python, target, registry_file=reg_file, registry=reg, model_id=new["model_id"],
                                fields=new["json_fields"], encoder=enc, text_hidden=text_hidden,
                                timeout=timeout)
        problems = [fwd.error] if fwd.error else fwd.problems
        evidence.append(evidence_item(f"new projector {new['model_id']} forward behind {enc['model_id']}",
                                      ["megatron_projector_forward", new["model_id"]], 0 if fwd.ok else 1, t0,
                                      time.time(), "\n".join(p for p in problems if p), fwd.facts))
        if fwd.ok:
            summaries.append(f"images -> {enc['model_id']} {fwd.facts['encoder_output_shape']} -> new "
                             f"{new['model_id']} {fwd.facts['output_shape']} (the text decoder's width "
                             f"{text_hidden}; random weights)")
        elif _blocked(target, fwd):
            blocked_by = blocked_by or fwd.missing_module
        else:
            failures += [p for p in problems if p]
            summaries.append(f"new {new['model_id']} forward failed: " + "; ".join(problems[:3]))
    else:
        summaries.append(f"new {new['model_id']}'s forward behind the encoder not run: the encoder is a registered "
                         "one, whose input layout this check does not build")
    if blocked_by:
        summaries.append(f"new {new['model_id']} not built here: it needs {blocked_by} (the accelerator environment)")
    return {"passed": not failures and not blocked_by, "needs_accelerator": bool(blocked_by) and not failures,
            "summary": "; ".join(summaries), "evidence": evidence, "failure_text": "\n".join(failures),
            "projector_converter_used": f"msmigrate_projector:{new['model_id']}" if conv is not None else None,
            "projector_unmapped_hf": conv.unmapped_hf if conv is not None else []}
