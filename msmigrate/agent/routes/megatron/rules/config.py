"""Config phase of the Megatron route: the model JSON (``--mm-model``) and the launch script, both derived from the
matched example, with the spec's TP/PP/CP/VPP checked against the model before anything is written (heads and KV
heads by TP, layers by PP x VPP, world size and batch arithmetic) and the script's flags checked against the
framework's own ``add_argument`` definitions by the config tool / gate G3.

Steps: 0 write the model JSON + launch script → 1 check them the way G3 will (when the tool is offered) → 2 done."""

from __future__ import annotations

import json
from typing import Any

from msmigrate.agent.routes.megatron.draft import draft_launch_script, draft_model_json, set_numerics
from msmigrate.agent.policies.base import PhaseUnsupported, PolicyView, tool_call
from msmigrate.agent.policies.rules.steps import step_of, write
from msmigrate.tools.megatron.encoder_structure import weight_shapes
from msmigrate.tools.megatron.parallel_check import ParallelSizes, check_parallel, text_config

CHECK_TOOL = "check_megatron_config"


def batch_plan(plan: dict[str, Any]) -> tuple[int, int, int]:
    """World size, micro batch and gradient-accumulation steps: the smallest world the sizes need (dp 1) unless
    the launch asks for more ranks (then dp = ranks / (tp*pp*cp)); micro batch 1; two accumulation steps so the
    global batch is more than one micro batch (the arithmetic is exercised, not trivially 1)."""
    par = plan["parallel"]
    model_par = par["tp"] * par["pp"] * par["cp"]
    ranks = int(plan.get("launch_ranks") or 0)
    world = ranks if ranks >= model_par and ranks % model_par == 0 else model_par
    return world, 1, 2


def next_calls(view: PolicyView, policy: Any) -> tuple[str, list[dict[str, Any]]]:
    plan, ctx = view.state["plan"], view.ctx
    step = step_of(view.messages)
    if step == 1 and CHECK_TOOL in {t.name for t in view.tools}:
        return ("Check the model JSON and launch script the way G3 will.",
                [tool_call(CHECK_TOOL, {"model_json": plan["model_json_path"], "script": plan["script_path"]},
                           prefix="rules")])
    if step >= 1:
        return "Config phase done; G3 decides.", []
    for key in ("example_model_json", "example_script"):
        if not plan.get(key):
            raise PhaseUnsupported("Megatron config", f"the plan has no {key.replace('_', ' ')} to start from "
                                   f"(similar case {plan.get('similar_case')})", "write the model JSON and launch "
                                   "script by hand, or run with --policy llm")
    cfg = json.loads((ctx.source / "config.json").read_text(encoding="utf-8"))
    par = plan["parallel"]
    world, mbs, accum = batch_plan(plan)
    sizes = ParallelSizes(tp=par["tp"], pp=par["pp"], cp=par["cp"], vpp=par["vpp"], world_size=world,
                          micro_batch_size=mbs, global_batch_size=mbs * accum * (world // (par["tp"] * par["pp"]
                                                                                           * par["cp"])),
                          grad_accum=accum)
    check = check_parallel(cfg, sizes)
    if check.error or check.problems:
        raise PhaseUnsupported("Megatron parallel sizes", check.error or "; ".join(check.problems),
                               "choose sizes that divide the model (parallelism in the spec)")
    example = json.loads((ctx.target / plan["example_model_json"]).read_text(encoding="utf-8"))
    shapes = weight_shapes(ctx.source)
    model = draft_model_json(example, cfg, plan.get("components") or {}, par, shapes)
    new = plan.get("new_component")
    if new and isinstance(model.text.get("image_encoder"), dict):
        # the new encoder reads the fields its own class reads; the example section was the closest's
        old = model.text["image_encoder"].get("vision_encoder") or {}
        kept = {k: old[k] for k in ("params_dtype", "freeze", "pipeline_num_layers") if k in old}
        model.text["image_encoder"]["vision_encoder"] = {**new["json_fields"], **kept}
        model.changes.append(f"vision_encoder = the new {new['model_id']}'s fields {sorted(new['json_fields'])}")
        set_numerics(model.text["image_encoder"]["vision_encoder"], cfg.get("vision_config") or {}, shapes,
                     "vision_encoder", model.changes)
    proj = plan.get("new_projector")
    if proj and isinstance(model.text.get("image_encoder"), dict):
        old = model.text["image_encoder"].get("vision_projector") or {}
        kept = {k: old[k] for k in ("params_dtype", "freeze") if k in old}
        model.text["image_encoder"]["vision_projector"] = {**proj["json_fields"], **kept}
        model.changes.append(f"vision_projector = the new {proj['model_id']}'s fields {sorted(proj['json_fields'])}")
    text = text_config(cfg)
    script = draft_launch_script((ctx.target / plan["example_script"]).read_text(encoding="utf-8"), plan, world,
                                 mbs, accum, None, text.get("vocab_size"))
    if script.unmapped:
        raise PhaseUnsupported("Megatron launch script", f"{plan['example_script']} does not have the shape the "
                               f"rules policy edits ({'; '.join(script.unmapped)})", "write the launch script by "
                               "hand, or run with --policy llm")
    note = (f"Model JSON from {plan['example_model_json']} ({len(model.changes)} fields from the source; "
            f"dp {check.facts.get('dp')}, grad-accum {check.facts.get('grad_accum')}) and launch script from "
            f"{plan['example_script']} ({', '.join(script.changes)})."
            + (f" Source facts the example's sections have no field for: {model.unmapped}." if model.unmapped else ""))
    return note, [write(plan["model_json_path"], json.dumps(model.text, indent=4, ensure_ascii=False) + "\n",
                        "Megatron model JSON: " + "; ".join(model.changes)[:180]),
                  write(plan["script_path"], script.text, "launch script from the example: "
                        + ", ".join(script.changes)[:180])]
