"""Model phase: register the transformers class under the run's model_id in a plugin dir (Transformers path)."""

from __future__ import annotations

from typing import Any

from msmigrate.agent.policies.base import PhaseUnsupported, PolicyView
from msmigrate.agent.policies.rules.steps import step_of, write
from msmigrate.agent.routes.fsdp2.rules.code_templates import render_template


def plugin_files(plan: dict[str, Any], source_name: str) -> dict[str, str]:
    name = plan["model_id"]
    return {
        f"{plan['plugin_dir']}/__init__.py": f'"""Model plugin {name}: imported through training.plugin."""\n',
        f"{plan['plugin_dir']}/modeling_{name}.py": render_template(
            "model_plugin.py.j2", hf_class=plan["hf_class"], model_id=name, source_name=source_name),
    }


def next_calls(view: PolicyView, policy: Any) -> tuple[str, list[dict[str, Any]]]:
    plan = view.state["plan"]
    if plan["route"] != "transformers":
        raise PhaseUnsupported(f"custom-code model {plan['hf_class']}",
                               "the rules policy only registers transformers-native classes; this one needs the "
                               "source's own modeling code adapted (trust_remote_code)")
    if plan.get("architecture", "decoder") != "decoder":
        reason = next((r for r in plan.get("reasons", []) if r.startswith("architecture ")), plan["architecture"])
        raise PhaseUnsupported(f"{plan['architecture']} model {plan['hf_class']}",
                               f"the rules policy migrates decoder-only VLMs ({reason}); the framework's "
                               "template/collator path trains one causal sequence, which this model is not")
    if step_of(view.messages) > 0:
        return "Model plugin written; G1 decides.", []
    files = plugin_files(plan, view.ctx.source.name)
    return (f"Register {plan['hf_class']} as '{plan['model_id']}' in {plan['plugin_dir']}.",
            [write(p, c, f"model plugin for {plan['model_id']}") for p, c in files.items()])
