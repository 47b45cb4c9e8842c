"""Model phase: register the transformers class under the run's model_id in a plugin dir (Transformers path)."""

from __future__ import annotations

from typing import Any

from msmigrate.agent.policies.base import PhaseUnsupported, PolicyView
from msmigrate.agent.policies.rules.steps import step_of, write
from msmigrate.agent.code_templates import render_template


def plugin_files(plan: dict[str, Any], source_name: str) -> dict[str, str]:
    name = plan["model_id"]
    return {
        f"{plan['plugin_dir']}/__init__.py": f'"""Model plugin {name}: imported through training.plugin."""\n',
        f"{plan['plugin_dir']}/modeling_{name}.py": render_template(
            "model_plugin.py.j2", hf_class=plan["hf_class"], model_id=name, source_name=source_name),
    }


# what to do, by the media-expansion probe's reason (its own wording, tools/probes/media_expansion.py)
NO_BATCH_ADVICE = (
    ("ids do not change with the text", "nothing to migrate as a chat model: the processor writes a prompt of its "
     "own per image and drops the samples' text, so the model is trained (if at all) through that prompt format; a "
     "data path that builds it has to be written for it, by hand"),
    ("places its images itself", "the processor places its images by its call form (an interleaved prompt list), "
     "not at a placeholder in the text: a data path that drives it that way has to be written for it (--policy llm, "
     "or by hand)"),
    ("no image placeholder", "if the model has a chat template that writes the image placeholder its processor "
     "expands, ship it with the source (chat_template.jinja) and run again; a processor that inserts its media "
     "tokens itself needs a data path written for it (--policy llm, or by hand)"),
    ("has an image", "add samples with images (the `images` field of the data JSON) and run again"),
)


# what a training path for an architecture the rules policy declines would have to feed
_NEEDS = {"encoder-decoder": "its encoder and decoder inputs",
          "early-fusion": "image codes that stand in the text sequence"}


def no_batch_advice(error: str) -> str:
    """What to do when the source's own processor makes no batch from the samples, by its reason."""
    return next((todo for clue, todo in NO_BATCH_ADVICE if clue in error), "run it with --policy llm")


def next_calls(view: PolicyView, policy: Any) -> tuple[str, list[dict[str, Any]]]:
    plan = view.state["plan"]
    if plan["route"] != "transformers":
        raise PhaseUnsupported(f"custom-code model {plan['hf_class']}",
                               "the rules policy only registers transformers-native classes; this one needs the "
                               "source's own modeling code adapted (trust_remote_code)")
    if not plan.get("hf_class"):
        raise PhaseUnsupported("a model without a class name", "config.json's architectures[0] is not a Python class "
                               "name, so there is no transformers class to register")
    if plan.get("architecture", "decoder") != "decoder":
        reason = next((r for r in plan.get("reasons", []) if r.startswith("architecture ")), plan["architecture"])
        raise PhaseUnsupported(f"{plan['architecture']} model {plan['hf_class']}",
                               f"the rules policy migrates decoder-only VLMs ({reason}); the framework's "
                               "template/collator path trains one causal sequence, which this model is not",
                               "this route has no training path for it: it needs one in the target (model, "
                               f"collator and loss for {_NEEDS.get(plan['architecture'], 'its inputs')}), which no "
                               "policy of this route writes")
    exp = plan.get("media_expansion") or {}
    if plan.get("data_branch") == "B" and exp and not exp.get("ok"):
        # G1's forward is fed by the source's own processing of a real sample; where that cannot make a batch, the
        # only batch left is text-only, which a forward that needs pixels cannot take and which proves nothing for
        # one that can: decline here, with the processor's reason, rather than fail G1 on a batch we made up
        raise PhaseUnsupported("the model check (G1) on a faithful batch",
                               "the source's own processor makes no batch from the samples "
                               f"({exp.get('error') or 'no reason given'}), so G1 could only run a text-only "
                               "synthetic batch, and the data phase could not derive the media expansion either",
                               no_batch_advice(exp.get("error") or ""))
    if step_of(view.messages) > 0:
        return "Model plugin written; G1 decides.", []
    files = plugin_files(plan, view.ctx.source.name)
    return (f"Register {plan['hf_class']} as '{plan['model_id']}' in {plan['plugin_dir']}.",
            [write(p, c, f"model plugin for {plan['model_id']}") for p, c in files.items()])
