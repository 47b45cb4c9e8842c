"""Model phase of the Megatron route: reuse the registered components the plan matched by ``model_id`` (nothing to
write: the model JSON of the config phase selects them); register the new vision encoder the plan designed
(agent/routes/megatron/new_component.py) the framework's way: its class module under the models tree, its entry in the
vit layer-spec table, its entry in the encoder registry; then the weight-converter step (HF → Megatron layout →
HF, same tensors), whose result gate G1 of the route checks again.

A role still without a component (a projector no example pairs with the closest encoder, a decoder, an encoder
this writer cannot build) stops the phase with what is missing and why."""

from __future__ import annotations

from typing import Any

from msmigrate.agent.policies.base import PhaseUnsupported, PolicyView, tool_call
from msmigrate.agent.policies.rules.steps import last_results, step_of, write

CONVERTER_TOOL = "convert_weights"


def next_calls(view: PolicyView, policy: Any) -> tuple[str, list[dict[str, Any]]]:
    plan = view.state["plan"]
    comps = plan.get("components") or {}
    if plan.get("new_components"):
        lines = [f"{role}: {comps.get(role, {}).get('why', '')}" for role in plan["new_components"]]
        raise PhaseUnsupported("new Megatron component(s) " + ", ".join(plan["new_components"]),
                               "no registered component fits the source's architecture — " + " | ".join(lines),
                               "register the component (class, layer spec, registry entry by model_id) in the "
                               "target, or run with --policy llm")
    reuse = ", ".join(f"{r} {m['model_id']}" for r, m in comps.items() if m.get("model_id"))
    step = step_of(view.messages)
    tools = {t.name for t in view.tools}
    new, proj = plan.get("new_component"), plan.get("new_projector")
    if new or proj:
        if step == 0:
            note, calls = [], []
            if new:
                note.append(f"Register the new vision_encoder {new['model_id']}: {new['class_name']} in "
                            f"{new['module_path']}, an entry in the encoder registry and in the layer-spec table ("
                            + "; ".join(f"{k}: {v}" for k, v in new["reuses"].items()) + ").")
                calls += [write(new["module_path"], new["code"], f"new vision encoder {new['model_id']}")]
                calls += [write(path, text, f"register {new['model_id']}") for path, text in new["edits"].items()
                          if not proj or path not in proj["edits"]]  # the projector's text holds both entries
            if conv := plan.get("new_converter"):
                note.append(f"Write the weight converter {conv['class_name']} in {conv['module_path']} and offer it "
                            f"through {', '.join(conv['edits'])}.")
                calls += [write(conv["module_path"], conv["code"], f"new weight converter {conv['class_name']}")]
                calls += [write(path, text, f"offer {conv['class_name']}") for path, text in conv["edits"].items()]
            if proj:
                note.append(f"Register the new vision_projector {proj['model_id']}: {proj['class_name']} in "
                            f"{proj['module_path']} and an entry in the projector registry.")
                calls += [write(proj["module_path"], proj["code"], f"new vision projector {proj['model_id']}")]
                calls += [write(path, text, f"register {proj['model_id']}") for path, text in proj["edits"].items()]
            return " ".join(note), calls
        step -= 1  # the converter step follows
    if step == 0 and CONVERTER_TOOL in tools:
        return (f"Reuse the registered components ({reuse}); convert the HF weights to the Megatron layout with "
                f"tp={plan['parallel']['tp']}, pp={plan['parallel']['pp']} and check the round trip.",
                [tool_call(CONVERTER_TOOL, {"output_dir": plan["converter_output"], "tp": plan["parallel"]["tp"],
                                            "pp": plan["parallel"]["pp"]}, prefix="rules")])
    if step == 0:
        return (f"Reuse the registered components ({reuse}); no converter tool is offered in this run, so G1's "
                "own round trip is the converter evidence.", [])
    res = last_results(view.messages).get(CONVERTER_TOOL, {})
    if res and not res.get("ok"):
        return f"Converter step failed: {res.get('error')}; G1 decides.", []
    return f"Components reused ({reuse}); converter step done; G1 decides.", []
