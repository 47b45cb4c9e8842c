"""Which registered Megatron components (by ``model_id``) fit the source's architecture — from evidence only.

The Megatron route builds a model from sub-modules a model JSON picks by ``model_id`` (image_encoder.vision_encoder,
image_encoder.vision_projector, text_decoder). What a registered component can represent is read from the target
itself: the fields its own example model JSONs give it (``examples/**/*.json`` with those sections). What the source
has is read from its config.json sub-configs, translated to the framework's field names (the HF → Megatron config
naming the framework's converters use, not a table of model families).

A field is *distinctive* for a role when some components of that role in the examples are configured with it and
others are not (``fullatt_block_indexes``, ``deepstack_visual_indexes``, ``qk_layernorm``, ``add_qkv_bias`` …);
fields every component takes (sizes, heads) say nothing about fit. The examples are the model JSONs the target's
launch scripts pass to pretrain_vlm.py (other entry points' JSONs share section names, not components); features
the config has no field for (per-head q/k norms, a q-projection bias) come from the source's weight names. A
component fits when it is configured with every distinctive field the source has; among fits, the one expecting
the fewest distinctive fields the source lacks wins. No fit: the plan says a new component is needed and which
source features no registered one configures. The projector is compared by what it builds
(tools/megatron/projector_structure.py: matrices, norms, a width change before the first matrix, pooling), the
source's projector tensors against each registered projector class's code; among those that build it, the one the
matched encoder's examples pair it with wins. None builds it: a new projector is needed, with the differing facts.

Fields alone cannot tell architectures apart when every example is one family (the real snapshot's pretrain_vlm.py
examples are all Qwen-family, so a CLIP / SigLIP / GLM-4V encoder would match a Qwen one). The vision encoder is
therefore first compared by what it builds (tools/megatron/encoder_structure.py: patch-embedding kind, learned
position table, class token, extra convolutions), the source's weights against each registered component's own
code; only components that build the same thing are then compared by fields. None builds it: a new component is
needed, with the differing facts named.

The text decoder is likewise compared by what it computes before its fields: the source language model's
architecture (attention q/k/v bias, norm type, gated MLP, activation — from one block of its saved weights and its
config, tools/megatron/numerics.py — and the rotary kind, multimodal when its rope settings split sections) against
the values the component's examples fix (a value every example of the id gives it: that is how the target builds the
component; a value its examples vary is a setting, not compared). A component that computes something else (a
``llama`` decoder without q/k/v bias against ``qwen2_5_lm``, whose every example sets ``add_qkv_bias: true``) is not
reused; the match names the closest and the facts that differ.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron.encoder_structure import (EncoderStructure, encoder_structures, source_structure,
                                                        structure_diff, weight_shapes)
from msmigrate.tools.megatron.encoder_taps import component_taps, converter_taps, source_taps, taps_diff
from msmigrate.tools.megatron.numerics import source_numerics
from msmigrate.tools.megatron.parallel_check import text_config
from msmigrate.tools.megatron.projector_structure import (ProjectorStructure, projector_diff, projector_structures,
                                                          source_projector_of)

# role -> where it sits in the model JSON
ROLES = {"vision_encoder": ("image_encoder", "vision_encoder"),
         "vision_projector": ("image_encoder", "vision_projector"), "text_decoder": ("text_decoder",)}
# HF config field -> the Megatron/MindSpeed-MM TransformerConfig field carrying the same fact
HF_TO_MM = {"depth": "num_layers", "num_hidden_layers": "num_layers", "intermediate_size": "ffn_hidden_size",
            "num_heads": "num_attention_heads", "num_key_value_heads": "num_query_groups",
            "rms_norm_eps": "layernorm_epsilon", "layer_norm_eps": "layernorm_epsilon",
            "window_size": "window_attn_size",
            "hidden_act": "activation_func", "in_chans": "in_channels", "attention_bias": "add_qkv_bias",
            "tie_word_embeddings": "untie_embeddings_and_output_weights", "embed_dim": "hidden_size"}
VISION_KEYS = ("vision_config", "vision_tower_config", "visual")
# what the language model's weight names show that its config has no field for (transformers' module names ->
# the framework's field): per-head q/k norms, a bias on the q projection
WEIGHT_FEATURES = {r"\.self_attn\.(q_norm|k_norm)\.weight$": "qk_layernorm",
                   r"\.self_attn\.q_proj\.bias$": "add_qkv_bias",
                   # an output matrix saved apart from the embedding: untied (a tied one is not saved twice)
                   r"(^|\.)lm_head\.weight$": "untie_embeddings_and_output_weights"}
# config fields whose fact the weights show more reliably (tie_word_embeddings defaults to True in transformers
# when a config.json omits it; "untie" is its negation, so a value-blind rename would invert it)
FROM_WEIGHTS = {"tie_word_embeddings"}
ENTRY = "pretrain_vlm.py"
# the model-JSON fields of a text decoder that say what it computes (not how big it is)
ARCH_FIELDS = ("add_qkv_bias", "add_bias_linear", "normalization", "gated_linear_unit", "activation_func", "position_embedding_type",
               "qk_layernorm")
# the shell variables / flags MindSpeed-MM's example scripts pass the model and data JSON with
_ASSIGN = re.compile(r"^\s*(MM_MODEL|MM_DATA)\s*=\s*[\"']?([^\"'\s]+)", re.M)
_FLAG = re.compile(r"--(mm-model|mm-data)\s+[\"']?([^\"'\s$]+)")
# model-JSON fields that never say anything about architecture (precision, freezing, fusion switches)
NEUTRAL = {"model_id", "freeze", "fp16", "bf16", "params_dtype", "pipeline_num_layers", "use_fused_rotary_pos_emb",
           "hidden_dropout", "attention_dropout", "init_method_std", "recompute_granularity", "recompute_method",
           "recompute_num_layers", "use_remove_padding", "parallel_output", "attention_softmax_in_fp32"}


@dataclass
class ComponentMatch:
    role: str
    model_id: str | None = None  # the registered component to reuse; None: a new one is needed
    candidates: list[str] = field(default_factory=list)  # registered ids of this role the target's examples show
    distinctive_in_source: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # source features the chosen (or any) component does not take
    example: str | None = None  # the example model JSON the choice rests on
    why: str = ""
    structure: dict[str, Any] | None = None  # the source encoder's structure (weights), when it was read
    component_structure: dict[str, Any] | None = None  # what the chosen (or closest) component builds (its code)
    closest: str | None = None  # the registered id nearest the source when none fits
    # vision encoder: the source's per-layer mergers (Qwen3-VL's deepstack) against what the encoder's layers
    # build: {"source", "component", "missing", "converter"} (tools/megatron/encoder_taps.py)
    taps: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def script_assets(text: str) -> dict[str, str]:
    """``{"model": path, "data": path}`` an example launch script passes to its entry point (as written there)."""
    out = {}
    for var, val in _ASSIGN.findall(text):
        out["model" if var == "MM_MODEL" else "data"] = val
    for flag, val in _FLAG.findall(text):
        out.setdefault("model" if flag == "mm-model" else "data", val)
    return {k: v[2:] if v.startswith("./") else v for k, v in out.items()}


def route_model_jsons(target: Path) -> set[str]:
    """Model JSONs the target's own launch scripts pass to pretrain_vlm.py: the examples of this route (others
    belong to other entry points, whose model JSONs share the section names but not the components)."""
    out = set()
    for sh in Path(target).glob("examples/**/*.sh"):
        text = sh.read_text(encoding="utf-8", errors="replace")
        if ENTRY in text and script_assets(text).get("model"):
            out.add(script_assets(text)["model"])
    return out


def weight_names(source: Path) -> list[str]:
    """Tensor names from the source's safetensors headers (the JSON header only; no tensor is read)."""
    return list(weight_shapes(source))


def weight_features(names: list[str]) -> set[str]:
    """Language-model features its weight names show (vision-tower tensors left out)."""
    lm = [n for n in names if "vision" not in n and "visual" not in n]
    return {feat for pat, feat in WEIGHT_FEATURES.items() if any(re.search(pat, n) for n in lm)}


def _section(doc: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    node: Any = doc
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) and node.get("model_id") else None


def example_components(target: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """role -> model_id -> {"fields": set of fields all its examples configure, "examples": [paths], "pairs": {...}}."""
    out: dict[str, dict[str, dict[str, Any]]] = {r: {} for r in ROLES}
    route = route_model_jsons(target)
    for path in sorted(Path(target).glob("examples/**/*.json")):
        if route and str(path.relative_to(target)) not in route:
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict) or not any(_section(doc, p) for p in ROLES.values()):
            continue
        rel = str(path.relative_to(target))
        sections = {r: _section(doc, p) for r, p in ROLES.items()}
        for role, sec in sections.items():
            if sec is None:
                continue
            entry = out[role].setdefault(sec["model_id"], {"fields": None, "examples": [], "pairs": {},
                                                           "values": None})
            fixed = {k: sec[k] for k in ARCH_FIELDS if k in sec}
            # the architecture values every example of the id agrees on (one that varies is a setting)
            entry["values"] = fixed if entry["values"] is None else {
                k: v for k, v in entry["values"].items() if k in fixed and fixed[k] == v}
            # a dict field's keys count too: the rotary split sits in rope_scaling in some examples, as in HF
            given = {k for k in sec if k not in NEUTRAL} | {
                sub for v in sec.values() if isinstance(v, dict) for sub in v if v.get(sub) is not None}
            # what every example of the id sets: one example's runtime switches are not the component's features
            entry["fields"] = given if entry["fields"] is None else entry["fields"] & given
            entry["examples"].append(rel)
            for other, osec in sections.items():
                if other != role and osec is not None:
                    entry["pairs"].setdefault(other, osec["model_id"])
    return out


def source_fields(cfg: dict[str, Any], role: str, weights: list[str] | None = None) -> set[str] | None:
    """The source's fields for a role in the framework's names (None: the source has no such part); ``weights``
    (tensor names) add the decoder features only the module structure shows."""
    if role == "text_decoder":
        sub = text_config(cfg)
    elif role == "vision_encoder":
        sub = next((cfg[k] for k in VISION_KEYS if isinstance(cfg.get(k), dict)), None)
    else:
        return None  # a projector has no sub-config of its own in HF; it follows the encoder's examples
    if not isinstance(sub, dict):
        return None
    out = set()
    for key, value in sub.items():
        if key in FROM_WEIGHTS:  # the weights say it (weight_features); without them, the config's negation
            if value is False and not weights:
                out.add(HF_TO_MM[key])
            continue
        if value is None or value is False or value == [] or value == {}:
            continue  # an absent feature (no window attention: fullatt_block_indexes []) is not a feature
        out.add(HF_TO_MM.get(key, key))
    rope = sub.get("rope_scaling") or sub.get("rope_parameters") or {}
    if isinstance(rope, dict) and rope.get("mrope_section"):
        out.add("mrope_section")  # multimodal rotary: the section split lives inside the rope settings in HF
    if role == "text_decoder" and weights:
        out |= weight_features(weights)
    return out


def match_role(role: str, fields: set[str], registry: dict[str, dict[str, Any]],
               registered: set[str] | None) -> ComponentMatch:
    ids = sorted(i for i in registry if registered is None or i in registered)
    out = ComponentMatch(role=role, candidates=ids)
    if not ids:
        out.why = f"no registered {role} has an example model JSON in the target to compare with"
        return out
    sets = {i: registry[i]["fields"] for i in ids}
    # what counts as a feature is read from every example of the role, registered or not: a feature only an
    # unregistered component takes is still a feature the registered ones cannot represent
    every = [e["fields"] for e in registry.values()]
    distinctive = set.union(*every) - set.intersection(*every)
    wanted = fields & distinctive
    out.distinctive_in_source = sorted(wanted)
    fits = [(len((sets[i] & distinctive) - fields), i) for i in ids if wanted <= sets[i]]
    if not fits:
        best = max(ids, key=lambda i: len(wanted & sets[i]))
        out.missing = sorted(wanted - sets[best])
        out.why = (f"no registered {role} is configured with the source's {out.missing}; closest {best} "
                   f"({registry[best]['examples'][0]}): a new {role} component is needed for those features")
        return out
    extra, chosen = min(fits)
    out.model_id, out.example = chosen, registry[chosen]["examples"][0]
    expects = sorted((sets[chosen] & distinctive) - fields)
    out.why = (f"{role} {chosen}: its example {out.example} configures every distinctive field the source has "
               f"({out.distinctive_in_source or 'none'})"
               + (f"; it also takes {expects}, which the source does not set" if expects else "")
               + (f"; other candidates {[i for _, i in sorted(fits)[1:]]} fit worse" if len(fits) > 1 else ""))
    return out


def decoder_architecture(cfg: dict[str, Any], shapes: dict[str, list[int]]) -> dict[str, tuple[Any, str]]:
    """field -> (value, evidence): what the source's language model computes, in the framework's field names."""
    sub = text_config(cfg) or {}
    out = {k: (f.value, f.evidence) for k, f in source_numerics(sub, shapes, "text_decoder").items()}
    rope = sub.get("rope_scaling") or sub.get("rope_parameters") or {}
    multimodal = isinstance(rope, dict) and bool(rope.get("mrope_section"))
    out["position_embedding_type"] = ("mrope" if multimodal else "rope",
                                      "config.json rope settings " + ("split mrope_section" if multimodal else
                                                                      "without mrope_section"))
    lm = [n for n in shapes if not any(w in n for w in ("vision", "visual"))]
    if lm:  # per-head q/k norms show in the weights only
        qk = "qk_layernorm" in weight_features(lm)
        out["qk_layernorm"] = (qk, "q_norm/k_norm weights " + ("present" if qk else "absent"))
    return out


# (source value, component value) pairs that compute the same under a condition the route can check later:
# multimodal rotary applies one rotary table per axis section; with the same position on every axis it is the
# plain 1-D rotary of that position (the sections split one frequency range). The framework's mrope position
# function gives every axis the token's index when the batch carries no image grid, and a 1-D-rotary source
# positions its image features as ordinary tokens.
COMPUTES_SAME = {("position_embedding_type", "rope", "mrope"): (
    "mrope with one position on every axis is rope: reused on the condition that the batch carries no image grid "
    "(then the framework's position function gives every axis the token index); the logits parity against the "
    "source on a real batch checks it")}


def architecture_diff(source: dict[str, tuple[Any, str]], component: dict[str, Any]) -> list[str]:
    """The facts the component's examples fix to a value the source does not compute (booleans a JSON omits are
    compared only where the examples give them)."""
    return [f"{k}: source {v!r} ({ev}), component {component[k]!r}" for k, (v, ev) in sorted(source.items())
            if k in component and component[k] != v and (k, v, component[k]) not in COMPUTES_SAME]


def reuse_conditions(source: dict[str, tuple[Any, str]], component: dict[str, Any]) -> list[str]:
    """The differences architecture_diff lets through, with the condition under which they compute the same."""
    return [f"{k}: source {v!r}, component {component[k]!r}: {COMPUTES_SAME[(k, v, component[k])]}"
            for k, (v, _) in sorted(source.items()) if k in component and (k, v, component[k]) in COMPUTES_SAME]


def match_decoder(fields: set[str], examples: dict[str, dict[str, Any]], registered: set[str] | None,
                  arch: dict[str, tuple[Any, str]]) -> ComponentMatch:
    """The text decoder: only the components whose examples compute what the source computes, then by fields."""
    ids = sorted(i for i in examples if registered is None or i in registered)
    diffs = {i: architecture_diff(arch, examples[i].get("values") or {}) for i in ids}
    same = {i for i in ids if not diffs[i]}
    if not ids or same:
        out = match_role("text_decoder", fields, examples, same if ids else registered)
        if out.model_id in examples and (conds := reuse_conditions(arch, examples[out.model_id].get("values") or {})):
            out.why += "; " + "; ".join(conds)
        others = sorted(set(ids) - same)
        if out.model_id and others:
            out.why += "; not reused, they compute something else: " + "; ".join(
                f"{i} ({', '.join(diffs[i])})" for i in others)
        return out
    best = min(ids, key=lambda i: (len(diffs[i]), i))
    out = ComponentMatch(role="text_decoder", candidates=ids, missing=diffs[best], closest=best,
                         example=examples[best]["examples"][0])
    out.why = (f"no registered text_decoder computes the source's language model; closest {best} "
               f"({out.example}) differs in {diffs[best]}: reusing it would change what the layers compute, a new "
               "text_decoder component (or one chosen by hand) is needed")
    return out


def match_encoder(fields: set[str], examples: dict[str, dict[str, Any]], registered: set[str] | None,
                  source: EncoderStructure | None, structures: dict[str, EncoderStructure]) -> ComponentMatch:
    """The vision encoder: first what it builds (the source's weights against each registered component's code),
    then, among the components that build the same thing, the fields their examples configure."""
    ids = sorted(i for i, s in structures.items() if not s.error and (registered is None or i in registered))
    if source is None or not ids:
        out = match_role("vision_encoder", fields, examples, registered)
        out.why += ("; structure not compared: " + ("the source's weights show no vision tower" if source is None
                                                     else "no registered encoder class could be read"))
        return out
    diffs = {i: structure_diff(source, structures[i]) for i in ids}
    builds = [i for i in ids if not diffs[i]]
    if not builds:
        # nearest: a different patch embedding weighs double (it changes the input layout the processor feeds,
        # where a class token or a position table is one parameter more or less); ties: one the examples show
        best = min(ids, key=lambda i: (sum(2 if d.startswith("patch_embed") else 1 for d in diffs[i]),
                                       i not in examples, i))
        out = ComponentMatch(role="vision_encoder", candidates=ids, missing=diffs[best], closest=best,
                             structure=source.to_dict(), component_structure=structures[best].to_dict())
        out.why = (f"no registered vision_encoder builds the source's encoder ({source.facts()}); closest {best} "
                   f"differs in {diffs[best]}: a new vision_encoder component is needed")
        return out
    why = f"registered encoders that build the source's structure {source.facts()}: {builds}"
    with_examples = set(builds) & set(examples)
    if with_examples:
        out = match_role("vision_encoder", fields, examples, with_examples)
        out.why = f"{why}; {out.why}"
    else:  # the component exists but no route example configures it: its fields are not known here
        out = ComponentMatch(role="vision_encoder", model_id=builds[0],
                             why=f"{why}; no pretrain_vlm.py example configures {builds[0]}: its fields are unchecked")
    out.candidates, out.structure = ids, source.to_dict()
    if out.model_id:
        out.component_structure = structures[out.model_id].to_dict()
    return out


def match_components(cfg: dict[str, Any], target: Path, registered: dict[str, set[str]] | None = None,
                     weights: list[str] | None = None,
                     shapes: dict[str, list[int]] | None = None) -> dict[str, ComponentMatch]:
    """role -> match. ``registered``: role -> model_ids the target's registries hold (None: examples only);
    ``weights``: the source's tensor names; ``shapes``: name -> shape (the encoder's structure is compared only
    with these)."""
    examples = example_components(target)
    out: dict[str, ComponentMatch] = {}
    weights = list(shapes) if shapes and not weights else weights
    for role in ("vision_encoder", "text_decoder"):
        fields = source_fields(cfg, role, weights)
        if fields is None:
            continue
        allowed = (registered or {}).get(role) if registered else None
        if role == "vision_encoder" and shapes:
            out[role] = match_encoder(fields, examples[role], allowed, source_structure(shapes),
                                      encoder_structures(target))
        elif role == "text_decoder":
            out[role] = match_decoder(fields, examples[role], allowed, decoder_architecture(cfg, shapes or {}))
        else:
            out[role] = match_role(role, fields, examples[role], allowed)
    enc = out.get("vision_encoder")
    if enc is not None:
        allowed = (registered or {}).get("vision_projector") if registered else None
        source = source_projector_of(cfg, shapes) if shapes else None
        structures = projector_structures(target) if source is not None else {}
        out["vision_projector"] = match_projector(enc, examples, allowed, source, structures)
        taps = source_taps(cfg, shapes) if shapes else None
        if taps is not None:
            match_taps(target, enc, out["vision_projector"], taps)
    return out


def match_taps(target: Path, enc: ComponentMatch, proj: ComponentMatch, taps: Any) -> None:
    """The source's per-layer mergers against what the matched (else closest) encoder's layers build. An encoder
    that does not build them does not fit: dropping them would change what the decoder layers receive."""
    enc_id = enc.model_id or enc.closest
    comp = component_taps(target, enc_id, proj.model_id) if enc_id else None
    missing = ([taps.error] if taps.error else []) + (taps_diff(taps, comp) if comp else
                                                       ["no encoder to compare the per-layer mergers with"])
    enc.taps = {"source": taps.to_dict(), "component": comp.to_dict() if comp else None, "missing": missing,
                "converter": converter_taps(taps, comp) if comp and not missing else None}
    feeds = f"{taps.count} per-layer merger(s) {taps.list} fed from tower layers {taps.index_field} {taps.indexes}"
    if not missing:
        enc.why += (f"; its layers build the source's {feeds}: {comp.layer_class}.{comp.attr} "
                    f"({comp.projector_class} as {comp.projector_id}, {comp.init_args or 'no arguments'}; "
                    f"{comp.where}), on the layers its {comp.index_field} names")
        return
    enc.missing = sorted(set(enc.missing) | set(missing))
    enc.why += f"; the source has {feeds}, and {enc_id or 'no encoder'} does not build them ({'; '.join(missing)})"
    if enc.model_id:
        enc.closest, enc.model_id = enc.model_id, None
        enc.why += ": a new vision_encoder component is needed"


def match_projector(enc: ComponentMatch, examples: dict[str, dict[str, Any]], allowed: set[str] | None,
                    source: ProjectorStructure | None, structures: dict[str, ProjectorStructure]) -> ComponentMatch:
    """The vision projector by what it builds (the source's projector tensors against each registered class's
    code); among those that build it, the one the encoder's example pairs with, then one with an example. Without
    the source's structure: the paired one, and the plan says its fit is not checked."""
    proj = ComponentMatch(role="vision_projector", candidates=sorted(examples["vision_projector"]))
    # the encoder's pair: of the matched encoder, else of the closest (a new encoder is built after it)
    enc_id = enc.model_id if enc.model_id in examples["vision_encoder"] else enc.closest
    enc_ex = examples["vision_encoder"].get(enc_id or "", {})
    paired = enc_ex.get("pairs", {}).get("vision_projector")
    paired = paired if paired and (allowed is None or paired in allowed) else None
    readable = sorted(i for i, s in structures.items() if not s.error and (allowed is None or i in allowed))
    if source is None or not readable:
        if paired:
            proj.model_id, proj.example = paired, enc_ex["examples"][0]
            proj.why = (f"vision_projector {paired}: the one {proj.example} pairs with encoder {enc_id} (its fit to "
                        "the source's projector is not checked: "
                        + ("no projector tensors found in the source" if source is None else
                           "no registered projector class could be read") + ")")
        else:
            proj.why = ("no registered projector is paired with the encoder in the target's examples: a projector "
                        "component is needed (or one chosen by hand)")
        return proj
    proj.candidates, proj.structure = readable, source.to_dict()
    unread = sorted(f"{i} ({s.error})" for i, s in structures.items() if s.error)
    diffs = {i: projector_diff(source, structures[i]) for i in readable}
    builds = [i for i in readable if not diffs[i]]
    # preference: the encoder's pair, then an id the examples configure (its fields are known), then the name
    order = sorted(readable, key=lambda i: (len(diffs[i]), i != paired, i not in examples["vision_projector"], i))
    best = order[0]
    proj.component_structure = structures[best].to_dict()
    facts = source.facts()
    if not builds:
        proj.closest, proj.missing = best, diffs[best]
        proj.why = (f"no registered vision_projector builds the source's projector {source.root} ({facts}); closest "
                    f"{best} differs in {diffs[best]}: a new vision_projector component is needed")
    else:
        proj.model_id = best
        ex = examples["vision_projector"].get(best, {}).get("examples") or []
        proj.example = enc_ex["examples"][0] if best == paired else (ex[0] if ex else None)
        proj.why = (f"vision_projector {best} builds the source's projector {source.root} ({facts})"
                    + (f"; the one {proj.example} pairs with encoder {enc_id}" if best == paired else
                       f"; not the one the encoder's example pairs with ({paired}: {diffs.get(paired)})"
                       if paired else "")
                    + (f"; others that build it: {[i for i in builds if i != best]}" if len(builds) > 1 else ""))
    if unread:
        proj.why += f"; not read: {unread}"
    return proj
