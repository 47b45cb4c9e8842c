"""Model phase of the Megatron route: reuse the registered components the plan matched by ``model_id`` (nothing to
write: the model JSON of the config phase selects them), or say which new component the source needs; then the
weight-converter step (HF → Megatron layout → HF, same tensors), whose result gate G1 of the route checks again.

Registering a new encoder / projector / decoder the framework's way (a class, its layer spec, an entry in the
registry dict) is model-writing the rules policy does not do: it stops with what is missing and why."""

from __future__ import annotations

from typing import Any

from msmigrate.agent.policies.base import PhaseUnsupported, PolicyView, tool_call
from msmigrate.agent.policies.rules.steps import last_results, step_of

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
