"""Drafts of the Megatron route's three files, each derived from the matched example of the target and the source's
config.json: the model JSON (sub-modules by ``model_id``, sizes from the source, layers split over the pipeline
stages), the data JSON (the example's, pointed at the source's processor and samples) and the launch script (the
example's, with the spec's TP/PP/CP/VPP and the batch arithmetic).

Only fields the example already gives a section are overwritten from the source (the component's own field set);
a source fact the section has no field for is reported, never invented into a field the component may not read.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from msmigrate.agent.routes.megatron.components import HF_TO_MM, ROLES, VISION_KEYS
from msmigrate.tools.megatron.numerics import FIELDS as NUMERIC_FIELDS
from msmigrate.tools.megatron.numerics import source_numerics
from msmigrate.tools.megatron.parallel_check import text_config

# top-level token ids the assembled model reads (the framework's name <- the HF names carrying it)
TOKEN_IDS = {"img_context_token_id": ("image_token_id", "image_token_index"),
             "vision_start_token_id": ("vision_start_token_id",)}


@dataclass
class Draft:
    text: dict[str, Any] | str
    changes: list[str] = field(default_factory=list)  # what was set, from which evidence
    unmapped: list[str] = field(default_factory=list)  # source facts no field of the example's section carries


def stage_layers(layers: int, pp: int, vpp: int, first_stage_only: bool = False) -> list[Any]:
    """``pipeline_num_layers`` in the framework's layout: ``[n per pp rank]``, or ``[[n per pp rank] per vpp]``.
    An encoder in front of the decoder runs on the first stage (``first_stage_only``): all its layers there."""
    if first_stage_only:
        flat = [layers] + [0] * (pp - 1)
        return flat if vpp == 1 else [flat if v == 0 else [0] * pp for v in range(vpp)]
    per = layers // (pp * vpp)
    return [per] * pp if vpp == 1 else [[per] * pp for _ in range(vpp)]


def _mm_values(sub: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in sub.items():
        mm = HF_TO_MM.get(key, key)
        if key == "tie_word_embeddings" and isinstance(value, bool):
            value = not value  # untie_... is the negation
        if mm in out and key not in HF_TO_MM:
            # a translated field wins over the same-named one: Qwen2-VL's vision embed_dim is the ViT width, its
            # hidden_size the merger's output (the real checkpoint/ converter reads embed_dim for the ViT)
            continue
        out[mm] = value
    rope = sub.get("rope_scaling") or sub.get("rope_parameters") or {}
    if isinstance(rope, dict):
        if rope.get("mrope_section"):
            out["mrope_section"] = list(rope["mrope_section"])
        if rope.get("rope_theta") and "rope_theta" not in out:
            out["rope_theta"] = rope["rope_theta"]
    return out


def _fill(section: dict[str, Any], values: dict[str, Any], role: str, changes: list[str],
          unmapped: list[str], skip: set[str]) -> None:
    for key in sorted(values):
        if key in skip or key == "model_id":
            continue
        if key in section:
            if section[key] != values[key] and not isinstance(values[key], dict):
                changes.append(f"{role}.{key} = {values[key]!r} (source; example had {section[key]!r})")
                section[key] = values[key]
        elif isinstance(values[key], (list, bool)) and values[key]:
            unmapped.append(f"{role}.{key}")


def set_numerics(section: dict[str, Any], sub_config: dict[str, Any], shapes: dict[str, list[int]], role: str,
                 changes: list[str]) -> None:
    """The section's numerics fields (activation, norm type, gated MLP, linear biases) from what the source's
    config and weights show, for the fields the section has: an example of a neighbouring family carries its own
    (G3 checks the same facts)."""
    for key, fact in source_numerics(sub_config, shapes, role).items():
        if key in NUMERIC_FIELDS and key in section and section[key] != fact.value:
            changes.append(f"{role}.{key} = {fact.value!r} (source {fact.evidence}; example had {section[key]!r})")
            section[key] = fact.value


def _fit_mrope_section(node: dict[str, Any], text: dict[str, Any], changes: list[str]) -> None:
    """A 1-D rotary source on an mrope decoder (reused because every axis then carries the token index): the
    sections must still split this model's rotary frequencies (head_dim / 2); the example's proportions are kept,
    their split is immaterial when every axis has the same position."""
    heads = text.get("num_attention_heads")
    head_dim = text.get("kv_channels") or (text["hidden_size"] // heads if heads and text.get("hidden_size") else None)
    old = node["mrope_section"]
    if not head_dim or not old or sum(old) == head_dim // 2:
        return
    half, total = head_dim // 2, sum(old)
    new = [max(1, v * half // total) for v in old]
    new[0] += half - sum(new)
    node["mrope_section"] = new
    changes.append(f"text_decoder.mrope_section = {new} (the example's {old} split {total} frequencies; the source's "
                   f"head_dim {head_dim} has {half}, and its 1-D rotary gives every axis the same position)")


def draft_model_json(example: dict[str, Any], cfg: dict[str, Any], components: dict[str, dict[str, Any]],
                     parallel: dict[str, int], shapes: dict[str, list[int]] | None = None) -> Draft:
    """``shapes``: the source's tensor names -> shapes (safetensors headers), for the numerics fields."""
    doc = copy.deepcopy(example)
    changes: list[str] = []
    unmapped: list[str] = []
    pp, vpp = parallel.get("pp", 1), parallel.get("vpp", 1)
    for name, hf_keys in TOKEN_IDS.items():
        val = next((cfg[k] for k in hf_keys if isinstance(cfg.get(k), int)), None)
        if name in doc and val is not None and doc[name] != val:
            changes.append(f"{name} = {val} (source config)")
            doc[name] = val
    text = _mm_values(text_config(cfg))
    vision_sub = next((cfg[k] for k in VISION_KEYS if isinstance(cfg.get(k), dict)), None)
    vision = _mm_values(vision_sub) if vision_sub else {}
    for role, path in ROLES.items():
        node: Any = doc
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        match = components.get(role) or {}
        if not isinstance(node, dict):
            continue
        if match.get("model_id") and node.get("model_id") != match["model_id"]:
            changes.append(f"{role}.model_id = {match['model_id']!r}")
            node["model_id"] = match["model_id"]
        if role == "text_decoder":
            _fill(node, text, role, changes, unmapped, skip=set())
            set_numerics(node, text_config(cfg), shapes or {}, role, changes)
            if "num_layers" in text:
                node["pipeline_num_layers"] = stage_layers(text["num_layers"], pp, vpp)
                changes.append(f"text_decoder.pipeline_num_layers = {node['pipeline_num_layers']} "
                               f"({text['num_layers']} layers over pp {pp} x vpp {vpp})")
            if isinstance(node.get("mrope_section"), list) and "mrope_section" not in text:
                _fit_mrope_section(node, text, changes)
            if "group_query_attention" in node and "num_attention_heads" in text:
                node["group_query_attention"] = text.get("num_query_groups", text["num_attention_heads"]) != \
                    text["num_attention_heads"]
        elif role == "vision_encoder" and vision:
            _fill(node, vision, role, changes, unmapped, skip=set())
            set_numerics(node, vision_sub or {}, shapes or {}, role, changes)
            if "llm_hidden_size" in node and "hidden_size" in text:
                node["llm_hidden_size"] = text["hidden_size"]
            if "num_layers" in vision:
                node["num_layers"] = vision["num_layers"]
                node["pipeline_num_layers"] = stage_layers(vision["num_layers"], pp, vpp, first_stage_only=True)
                changes.append(f"vision_encoder.pipeline_num_layers = {node['pipeline_num_layers']} (encoder on "
                               "the first pipeline stage)")
        elif role == "vision_projector" and vision:
            _draft_projector(node, example, vision, text, changes, (match.get("structure") or {}).get("widths"))
    return Draft(doc, changes, unmapped)


def _draft_projector(node: dict[str, Any], example: dict[str, Any], vision: dict[str, Any], text: dict[str, Any],
                     changes: list[str], widths: dict[str, int] | None = None) -> None:
    """The projector maps merged vision features to the LLM width: input = the encoder width, output = the LLM
    width; its inner width is the source projector's first matrix's output when its weights were read (``widths``),
    else in the same relation to the input the example's has (read from its numbers)."""
    enc = ((example.get("image_encoder") or {}).get("vision_encoder") or {})
    v_hidden, t_hidden = vision.get("hidden_size"), text.get("hidden_size")
    old_in = node.get("input_size")
    if "input_size" in node and v_hidden:
        node["input_size"] = v_hidden
    if "hidden_size" in node and t_hidden:
        node["hidden_size"] = t_hidden
    merge = vision.get("spatial_merge_size")
    if "ffn_hidden_size" in node and old_in and merge and node["ffn_hidden_size"] == old_in * enc.get(
            "spatial_merge_size", merge) ** 2 and v_hidden:
        node["ffn_hidden_size"] = v_hidden * merge ** 2
    if "ffn_hidden_size" in node and (widths or {}).get("inner"):
        node["ffn_hidden_size"] = widths["inner"]
    changes.append(f"vision_projector: input {node.get('input_size')} -> hidden {node.get('hidden_size')} "
                   f"(inner {node.get('ffn_hidden_size')})")


def draft_data_json(example: dict[str, Any], source: str, data_json: str, template: str | None) -> Draft:
    doc = copy.deepcopy(example)
    changes = []
    ds = doc.setdefault("dataset_param", {})
    pre, basic = ds.setdefault("preprocess_parameters", {}), ds.setdefault("basic_parameters", {})
    pre["model_name_or_path"] = source
    basic["dataset"] = data_json
    basic["dataset_dir"] = str(PurePosixPath(data_json).parent)
    if "cache_dir" in basic:
        basic["cache_dir"] = basic["dataset_dir"] + "/cache_dir"
    changes += [f"model_name_or_path = {source}", f"dataset = {data_json}"]
    if template and basic.get("template") != template:
        changes.append(f"template {basic.get('template')!r} -> {template!r}")
        basic["template"] = template
    loader = doc.get("dataloader_param") or {}
    if "pin_memory" in loader and loader["pin_memory"]:
        changes.append("dataloader pin_memory kept as the example has it (an accelerator setting)")
    return Draft(doc, changes)


# shell variables of the framework's example launch scripts, set from the spec and the model
_VAR = re.compile(r"^(?P<name>[A-Z_]+)=(?P<value>.*)$", re.M)


def draft_launch_script(example: str, plan: dict[str, Any], world: int, micro_batch: int, grad_accum: int,
                        seq_length: int | None, vocab: int | None) -> Draft:
    par = plan["parallel"]
    values = {"TP": par["tp"], "PP": par["pp"], "CP": par["cp"], "MBS": micro_batch, "GRAD_ACC_STEP": grad_accum,
              "NPUS_PER_NODE": world, "NNODES": 1, "MM_MODEL": f'"./{plan["model_json_path"]}"',
              "MM_DATA": f'"./{plan["data_json_path"]}"', "LOAD_PATH": f'"{plan["converter_output"]}"'}
    changes, seen = [], set()

    def sub(m: re.Match) -> str:
        name = m.group("name")
        if name not in values:
            return m.group(0)
        seen.add(name)
        changes.append(f"{name}={values[name]}")
        return f"{name}={values[name]}"

    text = _VAR.sub(sub, example)
    missing = [k for k in ("TP", "PP", "CP", "MBS", "MM_MODEL", "MM_DATA") if k not in seen]
    for flag, val in (("--seq-length", seq_length), ("--vocab-size", vocab)):
        if val is not None:
            text, n = re.subn(rf"{flag}\s+\d+", f"{flag} {val}", text)
            if n:
                changes.append(f"{flag} {val}")
    if par.get("vpp", 1) > 1 and "--virtual-pipeline-model-parallel-size" not in text:
        # MindSpeed-MM takes VPP as the number of virtual stages, equal to the length of pipeline_num_layers
        # (its validate_args patch rejects --num-layers-per-virtual-pipeline-stage as deprecated: uneven stages)
        new = text.replace("--pipeline-model-parallel-size ${PP} \\",
                           "--pipeline-model-parallel-size ${PP} \\\n"
                           f"    --virtual-pipeline-model-parallel-size {par['vpp']} \\", 1)
        if new != text:
            text = new
            changes.append(f"--virtual-pipeline-model-parallel-size {par['vpp']}")
    return Draft(text, changes, [f"variable {k} not in the example script" for k in missing])
