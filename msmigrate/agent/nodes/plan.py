"""Plan from evidence, not from the model's name: build route, data branch, registry names, similar case.

- route: ``transformers`` when the architecture class ships with transformers, ``custom`` when the folder needs
  ``trust_remote_code`` (auto_map + its own modeling files);
- data branch A when an existing template fits: its mm_plugin's image token is one of the source tokenizer's tokens
  and its first stop word (the end of an assistant turn) occurs in the source chat template (closest name
  breaks ties); otherwise B (add a template +
  mm_plugin, reuse the generic multimodal collator). C (a new dataset class) is never chosen automatically;
- architecture: decoder-only, encoder-decoder or early fusion, from config.json (``data_contract``);
- media expansion (transformers-native decoders): measured by the source's own processor in the target runtime on
  the real samples (``tools/media_expansion``); with the forward signature it decides which processor outputs reach
  the forward (mm_plugin, or computed by a generated collator) and which are dropped, each with its reason;
- custom code: the checkpoint's own facts (config templates, ``auto_map``, forward signature) and the processor
  class the target runtime really loads (``tools/runtime_processor``: AutoProcessor with trust_remote_code).
"""

from __future__ import annotations

import difflib
import json
import keyword
import re
from pathlib import Path, PurePosixPath
from typing import Any

from msmigrate.agent.backend_route import MEGATRON, choose_backend
from msmigrate.agent.chat_format import ChatFormat, ChatFormatError, derive_chat_format
from msmigrate.agent.routes.fsdp2.data_contract import GENERIC_COLLATOR_EXTRAS, architecture_kind, derive_contract
from msmigrate.agent.routes.fsdp2.weights_load import hf_weight_dir
from msmigrate.agent.deps import RunDeps
from msmigrate.agent.launch_size import launch_size
from msmigrate.agent.routes.megatron.plan import make_megatron_plan
from msmigrate.agent.similar_case import remote_code_build_path
from msmigrate.agent.state import EXIT_UNSUPPORTED
from msmigrate.core.source_derivation import derive
from msmigrate.tools.checkpoint_conversion import convert_checkpoint
from msmigrate.tools.media_expansion import MediaExpansion, derive_media_expansion
from msmigrate.tools.repo_reader.placeholder_facts import placeholder_collision, target_placeholders
from msmigrate.tools.repo_reader.processor_code import (declared_processor_code, describe_unmeasured,
                                                         describe_unreached)
from msmigrate.tools.repo_reader.training_facts import contract_text, measure_own_pipeline, source_training_facts
from msmigrate.tools.repo_reader.wiring_facts import collate_advice
from msmigrate.tools.runtime_processor import RuntimeProcessor, probe_runtime_processor
from msmigrate.tools.source_step import SOURCE_STEP_ADVICE, copy_step, describe

GENERIC_COLLATOR = "qwen3vl"  # the generic multimodal seq2seq collator in MindSpeed-MM (contract §8.2)


def forward_params(src: dict[str, Any]) -> set[str] | None:
    fwd = src.get("forward") or {}
    params = fwd.get("parameters") or fwd.get("params")
    if not params and isinstance(fwd.get("signature"), str):  # the static reader of remote code gives the text
        params = signature_params(fwd["signature"])
    if not params:
        return None
    return {p["name"] if isinstance(p, dict) else str(p) for p in params}


# what a causal LM's forward takes besides media (transformers' own names, not a family's)
TEXT_FORWARD_PARAMS = {"input_ids", "attention_mask", "position_ids", "past_key_values", "inputs_embeds", "labels",
                       "use_cache", "output_attentions", "output_hidden_states", "return_dict", "token_type_ids",
                       "head_mask", "encoder_hidden_states", "encoder_attention_mask", "cache_position",
                       "logits_to_keep", "num_logits_to_keep"}


def no_media_argument(src: dict[str, Any], architecture: tuple[str, str]) -> str | None:
    """A remote vision-language forward that names only text inputs (Qwen-VL-Chat's: the ids name each image's path,
    and the model opens it): a plan fact, since the usual data contract (processor pixels → a forward argument)
    does not hold."""
    params = forward_params(src)
    fwd = src.get("forward") or {}
    if not src.get("needs_trust_remote_code") or not params or architecture[0] != "decoder" or \
            not params <= TEXT_FORWARD_PARAMS:
        return None
    where = f" ({fwd['file']}:{fwd['line']})" if fwd.get("file") and fwd.get("line") else ""
    return (f"the source's forward{where} takes no image argument, only {sorted(params)}: its images reach the "
            "model through the ids or embeddings it builds itself (its own training pipeline's tag tokens, below, "
            "show what its ids carry); a port must carry them the same way, not as pixel_values")


def signature_params(signature: str) -> list[str] | None:
    """Parameter names of ``forward(self, a, b=None, **kwargs)`` (self and the ``*``/``**`` catch-alls left out)."""
    import ast

    try:
        fn = ast.parse(f"def {signature.strip()}:\n    pass\n").body[0]
    except SyntaxError:
        return None
    args = fn.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return [n for n in names if n != "self"] or None


def choose_collator(src: dict[str, Any], name: str) -> tuple[str, list[str], str]:
    """Reuse the generic collator unless the forward's explicit parameters lack a key it emits."""
    params = forward_params(src)
    if params is None:
        return GENERIC_COLLATOR, [], "forward signature unknown; reusing the generic collator"
    drops = [k for k in GENERIC_COLLATOR_EXTRAS if k not in params]
    if not drops:
        return GENERIC_COLLATOR, [], f"forward takes {', '.join(GENERIC_COLLATOR_EXTRAS)}: generic collator fits"
    return name, drops, f"forward does not take {', '.join(drops)}: a collator without it is added"


def _source_tokens(src: dict[str, Any]) -> set[str]:
    tokens = src.get("tokens") or {}
    out: set[str] = set(tokens.get("media_tokens") or [])
    for key in ("special_tokens", "added_tokens", "additional_special_tokens"):
        val = tokens.get(key) or []
        out.update(val.values() if isinstance(val, dict) else val)
    return {t for t in out if isinstance(t, str)}


def _chat_template_text(src: dict[str, Any]) -> str:
    """The chat template's source plus, when it renders, a rendered conversation: role markers are often built
    dynamically (``<|{{ role }}|>``), so the literal source alone would miss them."""
    tmpl = src.get("chat_template") or {}
    text = str(tmpl.get("text") or "")
    special = (src.get("tokens") or {}).get("special_tokens") or {}
    try:
        fmt = derive_chat_format(text, str(special.get("bos_token") or ""), str(special.get("eos_token") or ""))
        return "\n".join([text, fmt.prefix, fmt.user, fmt.assistant, fmt.system or ""])
    except ChatFormatError:
        return text


def _turn(user: str, assistant: str) -> str:
    """One rendered user+assistant exchange: where a format puts the newline between slots does not matter."""
    return user.replace("{{content}}", "\x00U\x00") + assistant.replace("{{content}}", "\x00A\x00")


def _source_format(src: dict[str, Any]) -> ChatFormat | None:
    return source_chat_format(src)[0]


def source_chat_format(src: dict[str, Any]) -> tuple[ChatFormat | None, str | None]:
    """The source's turn format from its chat template, or (None, "could not derive the chat format: …")."""
    special = (src.get("tokens") or {}).get("special_tokens") or {}
    text = str((src.get("chat_template") or {}).get("text") or "")
    if not text:
        return None, None
    try:
        return derive_chat_format(text, str(special.get("bos_token") or ""),
                                  str(special.get("eos_token") or "")), None
    except ChatFormatError as exc:
        return None, f"could not derive the chat format from the source's chat template: {exc}"


def choose_template(src: dict[str, Any], templates: list[dict[str, Any]],
                    expansion: MediaExpansion | None = None) -> tuple[dict[str, Any] | None, list[str]]:
    """The existing template that fits the source, or (None, why). Where the source processor's media expansion
    was measured, a template's image token must be one the processor WROTE; where that measurement failed, no
    template is chosen at all (a token's name in the tokenizer says nothing about how an image becomes tokens:
    per-image numbered ids, a run the processor never writes). Only an unmeasured source is matched by names."""
    if expansion is not None and not expansion.ok:
        return None, [f"no existing template is chosen: the source processor's media expansion failed "
                      f"({expansion.error}), and token names alone do not say how an image becomes tokens"]
    tokens, chat = _source_tokens(src), _chat_template_text(src)
    # the media tokens a template may use: those the processor wrote where measured, else the tokenizer's
    media = set(expansion.tokens_written) if expansion is not None else tokens
    fmt = _source_format(src)
    source_turn = _turn(fmt.user, fmt.assistant) if fmt else None
    fits, excluded = [], []
    for t in templates:
        extra = t.get("extra", {})
        image = extra.get("image_token")
        stops = extra.get("stop_words") or []
        # when both turn formats are known they must render the same exchange: a shared media token is not enough
        if source_turn and extra.get("format_user") and extra.get("format_assistant") and \
                _turn(extra["format_user"], extra["format_assistant"]).rstrip() != source_turn.rstrip():
            continue
        # ... with each token on the same side of the user/assistant boundary: the assistant slot is what is
        # trained, so a header newline moved into it trains a prompt token (G2's data parity fails on it)
        if fmt is not None and extra.get("format_user") and extra.get("format_assistant") and \
                (extra["format_user"], extra["format_assistant"].rstrip()) != (fmt.user, fmt.assistant.rstrip()):
            excluded.append(f"{t['id']} (turn slots {extra['format_user']!r} + {extra['format_assistant']!r} split "
                            f"the exchange differently from the source's {fmt.user!r} + {fmt.assistant!r})")
            continue
        # a reasoning template writes a thought block into every answer: never for a source whose template has none
        if extra.get("template_class") == "ReasoningTemplate" and "<think>" not in chat:
            excluded.append(f"{t['id']} (a reasoning template: it writes a thought block into every answer, the "
                            "source's chat template never does)")
            continue
        # the first stop word is what ends an assistant turn (it replaces eos); the others are extras
        if image and image in media and stops and (stops[0] in chat or stops[0] in tokens):
            closeness = difflib.SequenceMatcher(None, str(src.get("model_type", "")), t["id"]).ratio()
            # a reasoning template for a model whose chat template never thinks (or vice versa) fits worse
            mismatch = (extra.get("template_class") == "ReasoningTemplate") != ("<think>" in chat)
            # so does one that injects a default system prompt the model's own template does not have
            system_mismatch = fmt is not None and (extra.get("default_system") or "") != fmt.default_system
            fits.append(((mismatch + system_mismatch, -closeness), t))
    if not fits:
        return None, [f"no existing template uses one of the source's media tokens with matching stop words "
                      f"(source media tokens: {sorted((src.get('tokens') or {}).get('media_tokens') or [])})"
                      + (f"; excluded: {'; '.join(excluded)}" if excluded else "")]
    fits.sort(key=lambda x: x[0])
    best = fits[0][1]
    return best, [f"template {best['id']} fits: image token {best['extra']['image_token']!r} is a source token and "
                  f"its turn end {best['extra'].get('stop_words', [''])[0]!r} occurs in the source chat template"]


def make_plan(deps: RunDeps, state: dict[str, Any], expansion: MediaExpansion | None = None,
              architecture: tuple[str, str] = ("decoder", "not read"),
              runtime_processor: RuntimeProcessor | None = None) -> dict[str, Any]:
    src, inv = state["source_summary"], state["target_summary"]
    name = deps.ctx.model_name
    custom = bool(src.get("needs_trust_remote_code"))
    reasons = [("custom code: config.json has auto_map → " + ", ".join(src.get("custom_code_files", [])))
               if custom else f"transformers-native class {src.get('architectures')}"]
    failures: list[str] = [str(f) for f in src.get("could_not_derive") or []]  # recorded by the source reader
    fmt, fmt_failure = source_chat_format(src)
    failures += [fmt_failure] if fmt_failure else []
    chosen = derive("the template choice", choose_template, src, inv.get("templates", []), expansion,
                    default=(None, []))
    template, why = chosen.value
    failures += [chosen.failure] if chosen.failure else []
    reasons += why
    new_template, why_name = (name, None) if template else \
        new_template_id(getattr(deps.ctx, "source", None), inv.get("templates", []), name)
    if why_name:
        reasons.append(why_name)
    similar = (inv.get("similar_cases") or [{}])[0]
    reasons.append(f"architecture {architecture[0]}: {architecture[1]}")
    if no_media := no_media_argument(src, architecture):
        reasons.append(no_media)
    contract = None
    if expansion is not None and expansion.ok:
        derived = derive("the data contract (processor outputs → forward)", derive_contract, expansion,
                         forward_params(src))
        contract, failures = derived.value, failures + ([derived.failure] if derived.failure else [])
    if expansion is not None:
        reasons.append(f"media expansion measured by the source processor: {expansion.describe()}")
        if expansion.ok and (written := expansion.tokens_written):
            named = sorted((src.get("tokens") or {}).get("media_tokens") or [])
            unwritten = [t for t in named if t not in written]
            reasons.append(f"media tokens the source processor writes (measured): {written}"
                           + (f"; the tokenizer's media-named tokens it never wrote here: {unwritten}"
                              if unwritten else ""))
        if expansion.ok and (collides := placeholder_collision(
                [p.text for p in expansion.per_image], target_placeholders(getattr(deps.ctx, "target", None) or ""))):
            reasons.append(collides)
        if custom and not expansion.ok and (unmeasured := describe_unmeasured(
                declared_processor_code(getattr(deps.ctx, "source", None) or ""))):
            reasons.append(unmeasured)
    if custom and contract is not None and not contract.mm_input_keys:
        # remote code whose forward names none of the processor's outputs (MiniCPM-V's `forward(data, **kwargs)`):
        # "dropped: no such parameter" would be wrong; its own code says how they reach it
        reasons.append(unnamed_outputs_reason(src, expansion))
        contract = None
    if template:
        collator, drops, why_collator = GENERIC_COLLATOR, [], "existing template's collator"
    elif contract is not None:
        collator, drops = (name if contract.needs_collator else GENERIC_COLLATOR), contract.collator_drops
        why_collator = (f"collator {name}: computes {sorted(contract.collator_derives)}, drops {drops}"
                        if contract.needs_collator else "the generic collator carries every key the forward needs")
    else:
        collator, drops, why_collator = choose_collator(src, name)
    reasons.append(why_collator)
    for d in (contract.dropped if contract else []):
        reasons.append(f"processor output {d['key']} dropped: {d['reason']}")
    plan = {
        "route": "custom" if custom else "transformers",
        "model_id": name,
        "hf_class": python_class_name(src),
        "model_type": src.get("model_type"),
        "plugin_dir": f"mindspeed_mm/fsdp/models/{name}",
        "example_dir": f"examples/{name}",
        "config_path": f"examples/{name}/{name}_config.yaml",
        "script_path": f"examples/{name}/finetune_{name}.sh",
        "dataset_type": "huggingface",
        "data_plugin": "mindspeed_mm/fsdp/data/datasets/huggingface",
        "data_branch": "A" if template else "B",
        "template": template["id"] if template else new_template,
        "mm_plugin": template["extra"].get("mm_plugin") if template else name,
        "collator": collator,
        "collator_drops": drops,
        "architecture": architecture[0],
        "media_expansion": expansion.to_dict() if expansion is not None else None,
        "media_tokens_written": expansion.tokens_written if expansion is not None else None,
        "data_contract": contract.to_dict() if contract is not None else None,
        "similar_case": similar.get("example"),
        "reasons": reasons + [f"similar case {similar.get('example')}: {', '.join(similar.get('why', []))}"
                              + (f" (ties broken by: {similar['tie_break']})" if similar.get("tie_break") else "")],
    }
    plan["data_branch_why"] = why[0] if template else (
        "no registered template fits (reasons above): new template, mm_plugin"
        + (" and collator" if collator != GENERIC_COLLATOR else "") + " entries on the huggingface dataset")
    if fmt is not None:
        plan["chat_content_form"] = fmt.content_form
        if fmt.content_form == "string":
            plan["reasons"].append("the source's chat template takes string content only (structured content items "
                                   "make it fail): render the source's conversations with string content, the "
                                   "media placeholders written into the text")
    if custom:
        code = derive("the custom-code facts", custom_code_facts, deps.ctx.source, src, runtime_processor)
        failures += [code.failure] if code.failure else []
        facts, path, why_path = code.value or ({}, "custom", f"build path custom: {code.failure}")
        plan.update(custom_code=facts, build_path=path, build_path_why=why_path)
        plan["reasons"] = plan["reasons"] + [why_path] + (
            [runtime_processor.note()] if runtime_processor is not None else [])
        branch = derive("the processor branch", processor_branch, deps.ctx.source, name, runtime_processor, plan,
                        inv.get("collate_wiring"), default={})
        failures += [branch.failure] if branch.failure else []
        plan.update(branch.value)
        found = derive("the attention flags of the remote code", attention_reason, src)
        failures += [found.failure] if found.failure else []
        attention = found.value
        if attention:
            plan.update(attention_flags_missing=(src.get("remote_attention") or {}).get("lacks"))
            plan["reasons"] = plan["reasons"] + [attention]
    else:
        plan.update(build_path="transformers", build_path_why=(
            f"build path transformers: transformers ships {plan['hf_class']}, so ModelHub loads it with "
            "from_pretrained; the plugin is a thin registered subclass"))
    # the source's own training pipeline (finetune/, train*.py, a Trainer.compute_loss, its dataset and collator):
    # the contract the plugin and the data pipeline must reproduce, and the oracle G1/G2 compare with
    training = derive("the source's training pipeline", source_training_facts,
                      getattr(deps.ctx, "source", None) or "", src.get("forward"))
    failures += [training.failure] if training.failure else []
    if training.value is not None:
        plan["source_training"] = training.value
        plan["source_training_contract"] = contract_text(training.value)
    if failures:
        # what could not be derived from the source is a fact the plan and every phase prompt show (reasons)
        plan["could_not_derive"] = list(dict.fromkeys(failures))
        plan["reasons"] = plan["reasons"] + plan["could_not_derive"]
    spec = getattr(deps, "spec", None)
    if spec is not None:  # the delivered launch script's size: the user's, never the similar example's
        plan["launch_size"] = launch_size(spec.launch, state.get("runtime"))
        plan["reasons"] = plan["reasons"] + [f"launch size: {plan['launch_size']['why']}"]
    return {**plan, **explicit_paths(spec)}


def python_class_name(src: dict[str, Any]) -> str | None:
    """``architectures[0]`` when it is a Python class name: code is generated from it (``from transformers import
    <it>``), so a config.json whose first architecture is anything else — text, code — gives None (no class)."""
    first = (src.get("architectures") or [None])[0]
    return first if isinstance(first, str) and first.isidentifier() and not keyword.iskeyword(first) else None


def remote_processor_expands(rp: RuntimeProcessor | None) -> bool:
    """The runtime's AutoProcessor (trust_remote_code) is a processor that turns images into pixels."""
    return bool(rp is not None and rp.ok and rp.loaded and rp.kind == "processor" and rp.handles_images)


def unnamed_outputs_reason(src: dict[str, Any], expansion: MediaExpansion) -> str:
    media = [k for k in dict.fromkeys(expansion.image_processor_keys + expansion.keys_with_image)
             if k not in ("input_ids", "attention_mask", "labels")]
    sig = (src.get("forward") or {}).get("signature") or sorted(forward_params(src) or [])
    return (f"the remote forward `{sig}` names none of the source processor's media outputs {media}: read in its "
            "code how they reach it (a dict argument, **kwargs); the plugin's forward takes the collated keys by name "
            "and passes them on that way, and the mm_plugin/collator deliver every output that code reads")


def declared_image_processor(source: Any) -> str | None:
    """The image processor class the folder's own preprocessor config names (what AutoImageProcessor loads)."""
    try:
        cfg = json.loads((Path(source) / "preprocessor_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return None
    value = cfg.get("image_processor_type") or cfg.get("feature_extractor_type")
    return str(value) if value else None


def processor_branch(source: Any, name: str, runtime_processor: RuntimeProcessor | None,
                     plan: dict[str, Any], collate: dict[str, Any] | None = None) -> dict[str, Any]:
    """The data branch when the processor the runtime really loads cannot turn images into pixels: the target's
    ``load_tokenizer`` hands the huggingface dataset no processor then (it keeps AutoProcessor's answer only when
    that is a processor with an image processor), so the planned B — template and mm_plugin entries on the
    huggingface dataset — has nothing to make ``pixel_values`` with (both live players found this out by reading
    the loader). The plan says so and recommends C: a dataset plugin of the model's own that pairs the tokenizer with
    the image processor the folder declares, reusing the huggingface pipeline and the B entries for the chat format
    and the media expansion. Which of the collator and a dataset ``collate_fn`` batches is the target's
    dataloader's choice (``collate``, tools/repo_reader/wiring_facts.py): the plan asks for the collator and says a
    ``collate_fn`` on the dataset would replace it, rather than asking for both. Empty when the runtime's processor
    handles images or the probe did not answer."""
    rp = runtime_processor
    if rp is None or not rp.ok or (rp.loaded and rp.kind == "processor" and rp.handles_images):
        return {}
    image = declared_image_processor(source)
    loaded = f"AutoProcessor → {rp.processor_class} ({rp.kind})" if rp.loaded else \
        f"AutoProcessor fails ({(rp.load_error or '')[:120]})"
    why = (f"branch C (dataset plugin mindspeed_mm/fsdp/data/datasets/{name}, dataset_type {name}): the runtime's "
           f"{loaded} has no image processor, so the target's load_tokenizer gives the huggingface dataset "
           f"processor=None and its mm_plugin cannot make pixel_values; the dataset plugin builds the processor "
           + (f"from the tokenizer and the folder's {image} (preprocessor_config.json, AutoImageProcessor)"
              if image else _pixels_from(source, rp))
           + f", reuses the huggingface pipeline (attr, template {plan['template']}, label masking) and registers "
             f"the template / mm_plugin{' / collator' if plan['collator'] != GENERIC_COLLATOR else ''} entries "
             f"as in B; " + collate_rule(plan["collator"], collate))
    return {"data_branch": "C", "dataset_type": name, "data_plugin": f"mindspeed_mm/fsdp/data/datasets/{name}",
            "data_branch_why": why, "reasons": plan["reasons"] + [why]}


def _pixels_from(source: Any, rp: RuntimeProcessor) -> str:
    """Where the dataset plugin gets its pixels when the folder declares no image processor: a remote processor
    AutoProcessor cannot reach; the loaded remote processor itself, which makes its image tensors in methods of its
    own (DeepSeek-VL2's tiles: no ``image_processor`` attribute, still the source's pixel code); else unknown."""
    code = declared_processor_code(source)
    if unreached := describe_unreached(code):
        return f"itself, as {unreached}"
    if rp.loaded and code and code.get("defined_in") and code.get("class") == rp.processor_class:
        return (f"around the loaded {rp.processor_class} itself: it has no image_processor attribute but is the "
                f"source's own pixel code — {describe_unmeasured(code)}")
    return "itself (the folder declares no image processor: say in its docstring what makes the pixels)"


def collate_rule(collator: str, collate: dict[str, Any] | None) -> str:
    """What batches a branch-C dataset, as the target's dataloader decides (one answer, not collator and collate_fn);
    the same words as the data prompt's and the plugin-route-data doc's."""
    return collate_advice(collate, collator)


TEMPLATE_ID = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]{0,39}")


def new_template_id(source: Any, templates: list[dict[str, Any]], name: str) -> tuple[str, str | None]:
    """The id of a new (branch B) template: the checkpoint's own name for its chat format when its config.json
    has one (InternVL's ``"template": "internvl2_5"``) and the target does not register it yet; else ``name``."""
    try:
        cfg = json.loads((Path(source) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return name, None
    taken = {t.get("id") for t in templates}
    for key in sorted(k for k in cfg if "template" in k.lower()):
        value = cfg[key]
        if isinstance(value, str) and TEMPLATE_ID.fullmatch(value) and value not in taken:
            return value, f"new template named {value!r}: the checkpoint's config.json names its chat format ({key!r})"
    return name, None


ATTN_FLAG_NAMES = {"sdpa": "_supports_sdpa", "flash_attention_2": "_supports_flash_attn"}


def attention_reason(src: dict[str, Any]) -> str | None:
    """The remote-code classes that would refuse the attention the run asks for, before any forward fails: the
    source facts' ``remote_attention`` (tools/repo_reader/attention_facts.py) lists each PreTrainedModel the top
    class builds and the flags it declares; transformers checks the requested implementation on each of them at
    build time (blind live run 12: the vendored vision tower had no ``_supports_sdpa``). None when all declare it."""
    facts = src.get("remote_attention") or {}
    rows = {r.get("class"): r for r in facts.get("classes") or [] if isinstance(r, dict)}
    parts = []
    for impl, names in (facts.get("lacks") or {}).items():
        where = [f"{n} ({rows.get(n, {}).get('at')}, "
                 + (f"built by {rows[n]['built_by']})" if rows.get(n, {}).get("built_by")
                    else "the top class: declare it on the plugin subclass)") for n in names]
        parts.append(f"no {ATTN_FLAG_NAMES.get(impl, impl)} ({impl}) on " + "; ".join(where))
    if not parts:
        return None
    return ("attention flags read from the remote code: transformers refuses a requested attention implementation "
            "at build time on every PreTrainedModel that does not declare it, nested ones included (check_forward "
            "and the CPU launches ask for sdpa; the framework's default is flash_attention_2): "
            + " | ".join(parts) + ". Declare the flag on that class in the vendored code (the class's own "
            "attention code still decides what runs; make sure it does not dispatch to an implementation it lacks)")


def custom_code_facts(source: Any, src: dict[str, Any],
                      runtime_processor: RuntimeProcessor | None = None) -> tuple[dict[str, Any], str, str]:
    """Facts a custom-code plan must rest on, read from the checkpoint's own files (not from the model's name):
    config fields naming a template, ``auto_map``, the processor the folder declares, the forward signature; and
    the build path they point to. The processor the runtime really loads comes from ``runtime_processor`` (the
    processor_class probe: AutoProcessor in the target runtime, as the framework's data loading calls it); without
    it, only what the folder declares — a folder without a processor class makes AutoProcessor return a bare
    tokenizer, which the huggingface dataset cannot use for media (then a processor folder or a dataset plugin)."""
    try:
        cfg = json.loads((Path(source) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cfg = {}
    auto_map = cfg.get("auto_map") or {}
    templates = {k: v for k, v in cfg.items() if "template" in k and isinstance(v, str)}
    tokens = src.get("tokens") or {}
    declared = tokens.get("processor_class") or (
        "processor_config.json" if (Path(source) / "processor_config.json").is_file() else None)
    params = sorted(forward_params(src) or [])
    facts = {"auto_map": auto_map, "config_templates": templates, "declared_processor": declared,
             "processor_code": declared_processor_code(source),
             "forward_parameters": params or None,
             "processor_note": None if declared else "no processor class declared: AutoProcessor will return the "
                                                     "bare tokenizer; media need a processor folder or a dataset plugin"}
    if runtime_processor is not None:
        # the runtime's answer wins over the guess from file names
        facts["runtime_processor"] = runtime_processor.to_dict()
        if runtime_processor.ok:
            handles = runtime_processor.loaded and runtime_processor.kind == "processor" and \
                runtime_processor.handles_images
            facts["processor_note"] = None if handles else runtime_processor.note()
    if remote_code_build_path(auto_map) == "transformers":
        path, why = "transformers", (f"build path transformers (trust_remote_code): auto_map names "
                                     f"{sorted(k for k in auto_map if k.startswith('AutoModel'))}, so ModelHub loads "
                                     f"the vendored class with from_pretrained: parameters from the checkpoint, "
                                     f"buffers as the model contract's meta-init rule says (never from init_weights, "
                                     f"which the trainer skips on a resumed load)")
    else:
        path, why = "custom", ("build path custom (BaseModel): auto_map names no AutoModel class, so ModelHub cannot "
                               "load it through transformers")
    if templates:
        why += f"; the checkpoint's config names its template: {templates}"
    return facts, path, why


def source_step_facts(deps: Any, src: dict[str, Any], training: dict[str, Any] | None) -> dict[str, Any]:
    """The source side of G4's training parity where the plan decides it: the user's step (``spec.source_step``,
    copied into the run folder, ``tools/source_step.copy_step``) -> ``source_step`` (its record) and the reason; a
    source whose forward takes no labels (no ``**kwargs`` either) and that ships no training code gives no loss to
    compare with -> ``source_gives_no_loss`` and the reason telling the user of the option. Else nothing."""
    spec = getattr(deps, "spec", None)
    ref = getattr(spec, "source_step", None)
    if ref:
        record = copy_step(ref, deps.ctx.run_dir)
        return {"source_step": record, "source_step_reason": (
            f"source step for G4's training parity: {describe(record)}, copied to {record['copy']} (sha256 "
            f"{record['sha256'][:12]}) and run by the probe in the target runtime")}
    params = forward_params(src)
    signature = str((src.get("forward") or {}).get("signature") or "")
    if params is None or "labels" in params or "**" in signature or (training or {}).get("kind") == "own":
        return {}
    why = (f"the source gives no loss: its forward ({signature or sorted(params)}) takes no labels and it ships no "
           "training code, so G4's training parity has no source step to compare the migrated model with (it "
           f"records 'not comparable'); {SOURCE_STEP_ADVICE}")
    return {"source_gives_no_loss": why, "source_step_reason": why}


def explicit_paths(spec: Any) -> dict[str, Any]:
    """The spec's explicit names for an existing migration (``model_id``, ``plugin_dir``, ``config``,
    ``launch_script``) win over the ones derived from model_name."""
    out: dict[str, Any] = {}
    if getattr(spec, "model_id", None):
        out["model_id"] = spec.model_id
    if getattr(spec, "plugin_dir", None):
        out["plugin_dir"] = spec.plugin_dir.strip("/")
    if getattr(spec, "config", None):
        out["config_path"] = spec.config
        out["example_dir"] = str(PurePosixPath(spec.config).parent)
    if getattr(spec, "launch_script", None):
        out["script_path"] = spec.launch_script
    return out


def with_converted_weights(ctx: Any, plan: dict[str, Any], derived: Any) -> dict[str, Any]:
    """The plan with ``weights`` (the converted checkpoint the delivery loads, and what was converted) where the
    runtime's transformers converts the source's checkpoint at load (``tools/checkpoint_conversion.py``); unchanged
    where it reads it key by key, or where the check failed (recorded: the target then loads the source's folder and
    G1 says what it left unwritten)."""
    if plan.get("route") != "transformers" or not hf_weight_dir(ctx.source):
        return plan
    conv = derived("whether transformers converts the checkpoint at load (its conversion mapping)",
                   convert_checkpoint, ctx.runtime_python, ctx.source, ctx.run_dir, timeout=ctx.probe_timeout_s)
    if conv is not None and not conv.ok:
        return {**plan, "could_not_derive": [*(plan.get("could_not_derive") or []), conv.summary()],
                "reasons": [*plan["reasons"], conv.summary()]}
    if conv is None or not conv.needed:
        return plan
    weights = {"folder": conv.folder, "converted_from": str(ctx.source), "transformers": conv.transformers,
               "converters": conv.converters, "tensors": conv.tensors, "bytes": conv.bytes,
               "max_rss_mb": conv.max_rss_mb, "summary": conv.summary()}
    return {**plan, "weights": weights, "reasons": [*plan["reasons"], f"weights: {conv.summary()}"]}


def make_plan_node(deps: RunDeps):
    def node(state: dict[str, Any]) -> dict[str, Any]:
        src, ctx = state["source_summary"], deps.ctx
        try:
            cfg = json.loads((ctx.source / "config.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            cfg = {}
        backend = choose_backend(getattr(deps, "spec", None), cfg, ctx.target)
        if backend.unsupported:
            # stop before any probe: the route cannot be carried out with these sizes / this target
            plan = {"backend": backend.backend, "model_id": ctx.model_name, "parallel_check": backend.parallel_check,
                    "reasons": backend.reasons}
            deps.trajectory.append("plan", plan=plan)
            deps.emit("plan", backend=backend.backend)
            return {"plan": plan, "phase": "report", "exit_status": EXIT_UNSUPPORTED,
                    "exit_detail": f"plan — {backend.unsupported}"}
        if backend.backend == MEGATRON:
            data = ctx.data_path or ctx.source / "data" / "train.json"
            measured = None if src.get("needs_trust_remote_code") else derive(
                "the media expansion (the source processor on the samples)", derive_media_expansion,
                ctx.runtime_python, ctx.source, data, run_dir=ctx.run_dir, timeout=ctx.probe_timeout_s)
            expansion = measured.value if measured is not None else None
            plan = make_megatron_plan(deps, state, cfg, backend, None, expansion)
            if measured is not None and measured.failure:  # recorded, shown with the plan's reasons
                plan = {**plan, "could_not_derive": [measured.failure],
                        "reasons": [*(plan.get("reasons") or []), measured.failure]}
            if getattr(getattr(deps, "spec", None), "source_step", None):  # said, not silently dropped
                plan = {**plan, "reasons": [*(plan.get("reasons") or []), (
                    f"source step {deps.spec.source_step} not used: the Megatron route's gates run no training "
                    "parity against a source step (the FSDP2 route's G4/G6 do)")]}
            deps.trajectory.append("plan", plan=plan)
            deps.emit("plan", backend=MEGATRON, route="megatron", components={
                r: m.get("model_id") for r, m in plan["components"].items()}, similar_case=plan["similar_case"])
            return {"plan": plan, "phase": "model"}
        # every derivation from the source that fails is recorded ("could not derive X: …"), never raised
        failures: list[str] = []

        def derived(what: str, fn: Any, *args: Any, default: Any = None, **kwargs: Any) -> Any:
            out = derive(what, fn, *args, default=default, **kwargs)
            failures.extend([out.failure] if out.failure else [])
            return out.value

        arch = derived("the architecture kind (config.json)", architecture_kind, cfg,
                       default=("decoder", "assumed: the architecture kind could not be derived"))
        expansion = None
        data = ctx.data_path or ctx.source / "data" / "train.json"
        if not src.get("needs_trust_remote_code") and arch[0] == "decoder":
            expansion = derived("the media expansion (the source processor on the samples)", derive_media_expansion,
                                ctx.runtime_python, ctx.source, data, run_dir=ctx.run_dir,
                                timeout=ctx.probe_timeout_s)
        runtime_processor = None
        if src.get("needs_trust_remote_code"):
            # custom code: what AutoProcessor really returns decides whether the huggingface dataset can carry media
            runtime_processor = derived("the processor the runtime loads (AutoProcessor)", probe_runtime_processor,
                                        ctx.runtime_python, ctx.source, trust_remote_code=True, run_dir=ctx.run_dir,
                                        timeout=ctx.probe_timeout_s)
            if remote_processor_expands(runtime_processor) and arch[0] == "decoder":
                # a remote-code processor that handles images is the source's own oracle for the expansion, as a
                # native one is (MiniCPM-V-style slices: only calling it shows `<image><unk>…</image>` + slices)
                expansion = derived("the media expansion (the remote processor on the samples)",
                                    derive_media_expansion, ctx.runtime_python, ctx.source, data,
                                    run_dir=ctx.run_dir, trust_remote_code=True,
                                    timeout=ctx.probe_timeout_s)
        state = {**state, "source_summary": {**src, "could_not_derive": [
            *(src.get("could_not_derive") or []), *failures]}}
        plan = make_plan(deps, state, expansion, arch, runtime_processor)
        plan = with_converted_weights(ctx, plan, derived)
        own = plan.get("source_training") or {}
        if own.get("kind") == "own" and own.get("dataset") and Path(data).is_file():
            # which positions the source's own pipeline trains, measured on the records (not only its code quoted)
            measured = derived("the source's own pipeline on the records", measure_own_pipeline, ctx.runtime_python,
                               ctx.source, data, own, ctx.run_dir, bool(src.get("needs_trust_remote_code")),
                               default={"error": "not measured"}, timeout=ctx.probe_timeout_s)
            own = {**own, "measured": measured}
            plan = {**plan, "source_training": own, "source_training_contract": contract_text(own)}
            if failures:
                plan["could_not_derive"] = list(dict.fromkeys([*(plan.get("could_not_derive") or []), *failures]))
        step = source_step_facts(deps, src, own)
        step_reason = step.pop("source_step_reason", None)
        plan = {"backend": backend.backend, **plan, **step, "parallel_check": backend.parallel_check,
                "reasons": backend.reasons + plan["reasons"] + ([step_reason] if step_reason else [])}
        deps.trajectory.append("plan", plan=plan)
        deps.emit("plan", **{k: plan[k] for k in ("route", "data_branch", "template", "similar_case")})
        return {"plan": plan, "phase": "model"}

    return node
