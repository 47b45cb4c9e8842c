"""Data branch B for transformers-native VLMs: a template derived from the model's own chat template, an mm_plugin
for its media-token expansion, and (when the forward needs a key the generic collator does not make, or does not
take one it makes) a collator — each an additive edit of the registry file where the framework keeps such entries.

The expansion of one image is what the source's own processor makes of it: measured in the plan on the real samples
(``tools/media_expansion``) to learn its shape, and computed at run time by the processor inside the generated plugin
from its own configuration, so nothing measured on the sample images (a token count, a patch size) is written into
the code. The machinery every such plugin needs is one shared class in the framework's mm_plugin module
(``ProcessorExpansionPlugin``, added once); each model's plugin subclasses it with its facts. Gate G2 proves it by a
forward on a real collated batch."""

from __future__ import annotations

from typing import Any

from msmigrate.agent.policies.base import PhaseUnsupported, PolicyView, write
from msmigrate.agent.chat_format import ChatFormatError, derive_chat_format
from msmigrate.tools.media_expansion import MediaExpansion
from msmigrate.agent.code_templates import render_template

TEMPLATE_FILE = "mindspeed_mm/fsdp/data/data_utils/func_utils/template.py"
PLUGIN_FILE = "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py"
COLLATOR_FILE = "mindspeed_mm/fsdp/data/dataloader/data_collator.py"


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))


def _insert_before(text: str, anchor: str, addition: str) -> str | None:
    i = text.find(anchor)
    return None if i < 0 else text[:i] + addition + text[i:]


def _plugins_entry(text: str, name: str, cls: str) -> str | None:
    """Add ``"name": Cls,`` as the last entry of the PLUGINS dict literal."""
    start = text.find("PLUGINS = {")
    end = text.find("\n}", start)
    return None if start < 0 or end < 0 else text[:end] + f'\n    "{name}": {cls},' + text[end:]


SHARED_PLUGIN = "ProcessorExpansionPlugin"


def render_shared_plugin() -> str:
    """The shared base class of the generated mm_plugins (added to the framework's mm_plugin module once)."""
    return render_template("mm_plugin_shared.py.j2")


def render_plugin(cls: str, family: str, exp: MediaExpansion, keys: list[str], text_lead: str = "") -> str:
    """The mm_plugin class for a model (``keys``: the image-processor outputs it returns; ``text_lead``: what the chat
    template writes before text-first user content only, ``ChatFormat.media_first_cut``)."""
    once = exp.after_media_once or {}
    return render_template(
        "mm_plugin_class.py.j2", cls=cls, family=family, processor_class=exp.processor_class,
        processor_class_base=exp.processor_class, placeholder=exp.placeholder, pre=exp.pre, post=exp.post,
        keys=keys, once_text=once.get("text"), once_where=once.get("where"), text_lead=text_lead,
        separator=(exp.separator_after_media or {}).get("text", ""))


def propose(view: PolicyView, files: tuple[str, str, str] = (TEMPLATE_FILE, PLUGIN_FILE, COLLATOR_FILE),
            derivable: dict[str, Any] | None = None,
            plan: dict[str, Any] | None = None) -> tuple[str, list[dict[str, Any]]]:
    """``files``: the template, mm_plugin and collator modules to extend (the FSDP2 data tree's by default; the
    Megatron route passes its own data tree's, whose registries have the same shape); ``derivable``: the batch
    fields a generated collator may compute (the FSDP2 route's data contract; none where no collator is written);
    ``plan``: the plan to propose for (default: the run's; the data phase passes the one it is re-deciding)."""
    template_file, plugin_file, collator_file = files
    state, ctx = view.state, view.ctx
    plan, src = plan or state["plan"], state["source_summary"]
    name = plan["template"]
    exp = MediaExpansion.from_dict(plan["media_expansion"]) if plan.get("media_expansion") else None
    if exp is None or not exp.ok:
        raise PhaseUnsupported("data branch B (media expansion)", "the source processor did not show how an image "
                               f"becomes tokens: {exp.error if exp else 'not measured'}")
    contract = plan.get("data_contract") or {}
    template_text = (src.get("chat_template") or {}).get("text")
    if not template_text:
        raise PhaseUnsupported("data branch B (chat template)", "the source has no chat template to derive the "
                               "turn format from", "add the model's chat_template.jinja, or run with --policy llm")
    tokens = (src.get("tokens") or {}).get("special_tokens", {})
    try:
        fmt = derive_chat_format(template_text, str(tokens.get("bos_token") or ""), str(tokens.get("eos_token") or ""))
    except ChatFormatError as exc:
        raise PhaseUnsupported("data branch B (chat template)", f"cannot derive the turn format: {exc}") from exc
    cls = _camel(name) + "Plugin"
    calls, kept = [], []
    plugin_text = (ctx.target / plugin_file).read_text()
    template_text_t = (ctx.target / template_file).read_text()
    collator_text = (ctx.target / collator_file).read_text()
    # Idempotent on repair: an entry this run (or an earlier one) already added is kept, not added twice.
    has_plugin = f'"{name}": ' in plugin_text
    has_template = f'name="{name}"' in template_text_t or f"name='{name}'" in template_text_t
    has_collator = any(f"_register_data_collator({q}{name}{q}" in collator_text for q in "\"'")
    kept = [what for what, present in (("mm_plugin", has_plugin), ("template", has_template),
                                       ("collator", has_collator)) if present]
    plugin_code = render_plugin(cls, plan["hf_class"], exp, contract.get("mm_input_keys") or ["pixel_values"],
                                fmt.media_first_cut)
    if f"class {SHARED_PLUGIN}(" not in plugin_text:
        plugin_code = render_shared_plugin() + plugin_code
    new_plugin = _insert_before(plugin_text, "PLUGINS = {", plugin_code + "\n\n")
    new_plugin = _plugins_entry(new_plugin, name, cls) if new_plugin else None
    if new_plugin is None:
        raise PhaseUnsupported("data branch B (mm_plugin registry)", f"{plugin_file} has no `PLUGINS = {{` dict "
                               "literal to extend")
    if not has_plugin:
        calls.append(write(plugin_file, new_plugin, f"mm_plugin {name}: {exp.media_token} x {exp.counts} ({exp.kind})"))
    call = render_template("template_call.py.j2", name=name, fmt=fmt, plugin=name, token=exp.media_token,
                           efficient_eos=not fmt.closes_answer(str(tokens.get("eos_token") or "")),
                           replace_eos=bool(fmt.stop_word and fmt.stop_word != tokens.get("eos_token")))
    if not has_template:
        calls.append(write(template_file, template_text_t.rstrip("\n") + "\n" + call,
                           f"template {name} derived from the source chat template"))
    if plan.get("collator") == name and not has_collator:
        derives = contract.get("collator_derives") or {}
        code = render_template("collator_class.py.j2", cls=f"DataCollatorFor{_camel(name)}", family=plan["hf_class"],
                               hf_class=plan["hf_class"], drop=plan.get("collator_drops", []), name=name,
                               derives=derives, rules=derivable or {}, media_token=exp.media_token)
        calls.append(write(collator_file, collator_text.rstrip("\n") + "\n" + code,
                           f"collator {name}: computes {sorted(derives)}, drops {plan.get('collator_drops')}"))
    if kept:
        note = f"Branch B entries already present, kept as they are: {', '.join(kept)}. "
        if not calls:
            return note + "Nothing else to add; G2 decides.", []
    return (f"Branch B: template '{name}' from the source chat template, mm_plugin '{name}' "
            f"({exp.describe()})"
            + (f", collator '{name}'" if plan.get("collator") == name else "") + ".", calls)
