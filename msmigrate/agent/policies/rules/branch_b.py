"""Data branch B for transformers-native VLMs: a template derived from the model's own chat template, an mm_plugin
for its media-token expansion, and (when its forward does not take what the generic collator emits) a collator —
each an additive edit of the registry file where the framework keeps such entries.

The expansion of one image is family knowledge (how the family's processor wraps its image tokens); the token
count is read from the model's own files, and gate G2 proves it by a forward on a real collated batch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from msmigrate.agent.policies.base import PolicyView
from msmigrate.agent.chat_format import ChatFormatError, derive_chat_format
from msmigrate.agent.policies.rules.steps import render_template, write

TEMPLATE_FILE = "mindspeed_mm/fsdp/data/data_utils/func_utils/template.py"
PLUGIN_FILE = "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py"
COLLATOR_FILE = "mindspeed_mm/fsdp/data/dataloader/data_collator.py"

# model_type → how its processor expands one image (media token, text around it, image-processor outputs to keep).
EXPANSIONS: dict[str, dict[str, Any]] = {
    "llava": {"token": "<image>", "prefix": "", "suffix": "", "keep": ["pixel_values"]},
    "internvl": {"token": "<IMG_CONTEXT>", "prefix": "<img>", "suffix": "</img>", "keep": ["pixel_values"]},
    "idefics3": {"token": "<image>", "prefix": "<fake_token_around_image><global-img>",
                 "suffix": "<fake_token_around_image>", "keep": ["pixel_values", "pixel_attention_mask"]},
    "smolvlm": {"token": "<image>", "prefix": "<fake_token_around_image><global-img>",
                "suffix": "<fake_token_around_image>", "keep": ["pixel_values", "pixel_attention_mask"]},
    "gemma3": {"token": "<image_soft_token>", "prefix": "\n\n<start_of_image>", "suffix": "<end_of_image>\n\n",
               "keep": ["pixel_values"]},
}
COUNT_KEYS = ("image_seq_length", "image_seq_len", "num_image_tokens", "mm_tokens_per_image")


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def tokens_per_image(source: Path, model_type: str) -> tuple[int | None, str]:
    """How many media tokens one image becomes, from the model's own files (no tiling / splitting)."""
    config = _json(source / "config.json")
    for fname in ("processor_config.json", "preprocessor_config.json"):
        cfg = _json(source / fname)
        for key in COUNT_KEYS:
            if isinstance(cfg.get(key), int):
                return cfg[key], f"{fname}:{key}"
    for key in COUNT_KEYS:
        if isinstance(config.get(key), int):
            return config[key], f"config.json:{key}"
    vision = config.get("vision_config") or {}
    size, patch = vision.get("image_size"), vision.get("patch_size")
    if model_type == "llava" and isinstance(size, int) and isinstance(patch, int):
        extra = 0 if config.get("vision_feature_select_strategy", "default") == "default" else 1
        return (size // patch) ** 2 + extra, "config.json: (vision image_size / patch_size)^2"
    return None, "no token count in processor_config.json, preprocessor_config.json or config.json"


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


def propose(view: PolicyView) -> tuple[str, list[dict[str, Any]]]:
    state, ctx = view.state, view.ctx
    plan, src = state["plan"], state["source_summary"]
    model_type, name = plan.get("model_type") or "", plan["template"]
    exp = EXPANSIONS.get(model_type)
    if exp is None:
        return (f"Branch B needs the media expansion of '{model_type}', which the rules policy does not know; "
                "use --policy llm.", [])
    template_text = (src.get("chat_template") or {}).get("text")
    if not template_text:
        return "The source has no chat template; cannot derive the turn format.", []
    tokens = (src.get("tokens") or {}).get("special_tokens", {})
    try:
        fmt = derive_chat_format(template_text, str(tokens.get("bos_token") or ""), str(tokens.get("eos_token") or ""))
    except ChatFormatError as exc:
        return f"Cannot derive the turn format from the chat template: {exc}", []
    count, count_source = tokens_per_image(ctx.source, model_type)
    if count is None:
        return f"Cannot tell how many tokens an image becomes: {count_source}.", []
    cls = _camel(name) + "Plugin"
    calls, kept = [], []
    plugin_text = (ctx.target / PLUGIN_FILE).read_text()
    template_text_t = (ctx.target / TEMPLATE_FILE).read_text()
    collator_text = (ctx.target / COLLATOR_FILE).read_text()
    # Idempotent on repair: an entry this run (or an earlier one) already added is kept, not added twice.
    has_plugin = f'"{name}": ' in plugin_text
    has_template = f'name="{name}"' in template_text_t or f"name='{name}'" in template_text_t
    has_collator = f'_register_data_collator("{name}"' in collator_text
    kept = [what for what, present in (("mm_plugin", has_plugin), ("template", has_template),
                                       ("collator", has_collator)) if present]
    plugin_code = render_template("mm_plugin_class.py.j2", cls=cls, family=plan["hf_class"], count=count,
                                  count_source=count_source, **exp)
    new_plugin = _insert_before(plugin_text, "PLUGINS = {", plugin_code)
    new_plugin = _plugins_entry(new_plugin, name, cls) if new_plugin else None
    if new_plugin is None:
        return f"{PLUGIN_FILE} has no `PLUGINS = {{` dict literal to extend.", []
    if not has_plugin:
        calls.append(write(PLUGIN_FILE, new_plugin, f"mm_plugin {name}: {exp['token']} x {count} per image"))
    call = render_template("template_call.py.j2", name=name, fmt=fmt, plugin=name, token=exp["token"],
                           replace_eos=bool(fmt.stop_word and fmt.stop_word != tokens.get("eos_token")))
    if not has_template:
        calls.append(write(TEMPLATE_FILE, template_text_t.rstrip("\n") + "\n" + call,
                           f"template {name} derived from the source chat template"))
    if plan["collator"] == name and not has_collator:
        code = render_template("collator_class.py.j2", cls=f"DataCollatorFor{_camel(name)}", family=plan["hf_class"],
                               hf_class=plan["hf_class"], drop=plan.get("collator_drops", []), name=name)
        calls.append(write(COLLATOR_FILE, collator_text.rstrip("\n") + "\n" + code,
                           f"collator {name}: generic minus {plan.get('collator_drops')}"))
    if kept:
        note = f"Branch B entries already present, kept as they are: {', '.join(kept)}. "
        if not calls:
            return note + "Nothing else to add; G2 decides.", []
    return (f"Branch B: template '{name}' from the source chat template, mm_plugin '{name}' "
            f"({exp['token']} x {count} per image, from {count_source})"
            + (f", collator '{name}'" if plan["collator"] == name else "") + ".", calls)
