"""The plan of a Megatron-route migration (pretrain_vlm.py): the components to reuse by ``model_id``, the example it
starts from, where the model JSON / data JSON / launch script go, the parallel sizes and the converter step.

Everything rests on evidence: the components on ``megatron_components`` (the target's example model JSONs and
registries against the source's config.json); the starting example is the one the matched text decoder's (else
encoder's) example JSON lives in, with the launch script of that folder that passes it as ``--mm-model``.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path, PurePosixPath
from typing import Any

from msmigrate.agent.backend_route import MEGATRON_ENTRY, BackendChoice
from msmigrate.tools.media_expansion import MediaExpansion
from msmigrate.tools.megatron.converters import converter_candidates
from msmigrate.tools.megatron.encoder_structure import weight_shapes
from msmigrate.tools.megatron.feature_norm import derive_feature_norm, reads_last_entry
from msmigrate.tools.megatron.launch_script import parse_launch_script
from msmigrate.tools.megatron.registry import read_registry
from msmigrate.agent.routes.megatron.components import (VISION_KEYS, ComponentMatch, example_components, match_components,
                                                 script_assets, weight_names)
from msmigrate.agent.routes.megatron.new_component import design_encoder
from msmigrate.agent.routes.megatron.new_converter import design_converter
from msmigrate.agent.routes.megatron.new_projector import design_projector, projector_module_files
from msmigrate.tools.megatron.numerics import numerics_diff, source_numerics
from msmigrate.tools.megatron.parallel_check import text_config

def example_script(target: Path, model_json: str) -> tuple[str | None, str | None]:
    """The launch script in the example's folder that runs pretrain_vlm.py under torchrun with this model JSON as
    ``--mm-model`` (read the way the config gate reads it), and its data JSON. A script of another launcher (the
    MindSpore examples' msrun) is no starting point for this route's gate."""
    folder = (Path(target) / model_json).parent
    for sh in sorted(folder.glob("*.sh")):
        text = sh.read_text(encoding="utf-8", errors="replace")
        if MEGATRON_ENTRY not in text:
            continue
        launch = parse_launch_script(text)
        assets = script_assets(text)
        if launch.error or Path(launch.entry or "").name != MEGATRON_ENTRY:
            continue
        if assets.get("model") == model_json:
            return str(sh.relative_to(target)), assets.get("data")
    return None, None


ASSEMBLY = ("mindspeed_mm/models/vlm_model.py", "VLMModel")  # what pretrain_vlm.py's model_provider builds
# what every VLM batch carries besides the media inputs (the collator makes them for any model)
TEXT_INPUTS = ("input_ids", "attention_mask", "labels")


def assembly_forward_params(target: Path) -> tuple[list[str] | None, bool]:
    """The explicit parameters of the assembled model's forward (read by AST), and whether it takes ``**kwargs``."""
    path, cls = ASSEMBLY
    try:
        tree = ast.parse((Path(target) / path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None, False
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "forward":
                    a = fn.args
                    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.arg != "self"]
                    return names, a.kwarg is not None
    return None, False


def batch_contract(target: Path, processor_keys: list[str] | None) -> dict[str, Any]:
    """Which batch fields the assembled Megatron model consumes through ``get_batch`` (``model(**batch)``): the
    source processor's outputs for an image sample (measured in the target runtime) plus labels. A field with no
    parameter would land in ``**kwargs`` unused (or fail without it)."""
    params, var_kw = assembly_forward_params(target)
    if params is None:
        return {"error": f"cannot read {ASSEMBLY[1]}.forward from {ASSEMBLY[0]}"}
    if not processor_keys:
        return {"error": "the source processor's outputs were not measured", "forward_params": params}
    wanted = sorted(set(processor_keys) | set(TEXT_INPUTS))
    consumed = [p for p in wanted if p in params]
    return {"forward": f"{ASSEMBLY[0]}:{ASSEMBLY[1]}.forward", "forward_params": params, "takes_kwargs": var_kw,
            "source_inputs": wanted, "consumed": consumed, "not_consumed": [p for p in wanted if p not in params]}


def parallel_sizes(spec: Any) -> dict[str, int]:
    par = getattr(spec, "parallelism", None)
    return {k: int(getattr(par, k, 1) or 1) for k in ("tp", "pp", "cp", "vpp")}


def make_megatron_plan(deps: Any, state: dict[str, Any], cfg: dict[str, Any], backend: BackendChoice,
                       registered: dict[str, set[str]] | None = None,
                       expansion: MediaExpansion | None = None) -> dict[str, Any]:
    ctx, src = deps.ctx, state["source_summary"]
    name = ctx.model_name
    if registered is None:
        registered, why_registered = registered_components(ctx.target)
    else:
        why_registered = "registered ids given"
    shapes = weight_shapes(ctx.source)
    matches = match_components(cfg, ctx.target, registered, weight_names(ctx.source), shapes)
    examples = example_components(ctx.target)
    _prefer_shared_example(matches, examples, ctx.target)
    _prefer_launchable_example(matches, examples, ctx.target)
    reasons = list(backend.reasons) + [why_registered]
    reasons += [m.why for m in matches.values()]
    new = [role for role, m in matches.items() if m.model_id is None]
    feature_norm = _feature_norm(ctx, matches, cfg, src, reasons)
    new_component = _new_encoder(ctx.target, matches, examples, cfg, shapes, src.get("model_type"), reasons,
                                 feature_norm)
    new_projector = _new_projector(ctx.target, matches, cfg, src.get("model_type"), reasons, new_component)
    if new_component or new_projector:
        new = [role for role, m in matches.items() if m.model_id is None]
    base = _base_match(matches)
    script, data_json = example_script(ctx.target, base.example) if base and base.example else (None, None)
    if base is not None:
        reasons.append(f"similar case {PurePosixPath(base.example).parent}: the matched {base.role} "
                       f"{base.model_id}'s example" + (f", launched by {script}" if script else
                                                       " (no launch script in its folder passes it)"))
    converters = converter_candidates(ctx.target, src.get("model_type"))
    new_converter = None
    if not converters.best and new_component:
        new_converter = _new_converter(ctx.target, matches, cfg, shapes, src.get("model_type"), new_component, reasons)
    if not new_converter and converters.best:
        reasons.append(f"weight converter {converters.best}: its file imports transformers.models."
                       f"{src.get('model_type')}")
    elif not new_converter:
        reasons.append(f"no weight converter in the target imports transformers.models.{src.get('model_type')} "
                       f"({converters.error or 'none matches'}): one is needed for the real weights; G1 checks "
                       "msmigrate's layout round trip instead")
    if data_json:
        reasons.append(f"data JSON from {data_json} (the example script's --mm-data): its dataset_type, template and "
                       "collator are kept; G2 renders the samples with that template, as the target registers it, "
                       "against the source's own chat template (a different chat format fails there)")
    data_b = data_branch(ctx.target, data_json, expansion, name)
    if data_b:
        reasons.append(data_b["why"])
    numerics = example_numerics(ctx.target, base.example if base else None, cfg, shapes, new_component)
    if numerics.get("differs"):
        reasons.append(f"numerics: the starting point differs from the source in " + "; ".join(
            f"{d['role']}.{d['field']} ({d['have']!r}, source {d['source']!r}: {d['evidence']})"
            for d in numerics["differs"]) + ": the config writer sets these from the source (G3 checks them)")
    example_dir = f"examples/{name}"
    plan = {
        "backend": backend.backend,
        "route": "megatron",
        "entry": MEGATRON_ENTRY,
        "model_id": name,
        "hf_class": (src.get("architectures") or [None])[0],
        "model_type": src.get("model_type"),
        "components": {role: m.to_dict() for role, m in matches.items()},
        "new_components": new,
        # the vision encoder the model phase registers (class, layer spec, registry entry), when one is designed
        "new_component": new_component,
        # what registering it edits: its module, the registry and the layer-spec table (additions only)
        # the vision projector the model phase registers (class + registry entry), when one is designed
        "new_projector": new_projector,
        # the weight converter the model phase writes when the target has none for this model_type
        "new_converter": new_converter,
        # data branch B: the example's template expands another media token than the source's processor makes;
        # the data phase registers a template + mm_plugin derived from the source (the FSDP2 route's writer)
        "data_branch": "B" if data_b else "A",
        "template": data_b["template"] if data_b else None,
        "editable_extra": sorted({*([new_component["module_path"], *new_component["edits"]] if new_component
                                    else []), *projector_module_files(new_projector),
                                  *([new_converter["module_path"], *new_converter["edits"]] if new_converter else []),
                                  *(MEGATRON_DATA_FILES[:2] if data_b else ())}),
        "similar_case": str(PurePosixPath(base.example).parent) if base and base.example else None,
        "example_model_json": base.example if base else None,
        "example_script": script,
        "example_data_json": data_json,
        "example_dir": example_dir,
        "model_json_path": f"{example_dir}/model_{name}.json",
        "data_json_path": f"{example_dir}/data_{name}.json",
        "script_path": f"{example_dir}/finetune_{name}.sh",
        "config_path": f"{example_dir}/model_{name}.json",  # what the config gate validates first
        # what the route's gates read (agent/gates/megatron_*): the delivered model JSON and its launch script
        "megatron": {"model_json": f"{example_dir}/model_{name}.json",
                     "script_path": f"{example_dir}/finetune_{name}.sh",
                     "data_json": f"{example_dir}/data_{name}.json", "entry": MEGATRON_ENTRY},
        "converter_output": f"ckpt/mm_path/{name}",
        "converter": new_converter["class_name"] if new_converter else converters.best,
        # the round trip runs at the launch's TP size: the shards the launch loads are the ones checked
        "converter_tp": parallel_sizes(getattr(deps, "spec", None))["tp"],
        # the source's per-layer mergers and the encoder attribute they land on, for G1's converter check
        "encoder_taps": ((matches.get("vision_encoder") or ComponentMatch("vision_encoder")).taps or {}).get(
            "converter"),
        "dataset_type": "huggingface",
        "parallel": parallel_sizes(getattr(deps, "spec", None)),
        "launch_ranks": getattr(getattr(getattr(deps, "spec", None), "launch", None), "nproc_per_node", None),
        "text_layers": (backend.parallel_check or {}).get("facts", {}).get("num_hidden_layers"),
        "batch_contract": batch_contract(ctx.target, expansion.keys_with_image if expansion and expansion.ok
                                         else None),
        "media_expansion": expansion.to_dict() if expansion is not None else None,
        "parallel_check": backend.parallel_check,
        # the numerics fields the starting sections get wrong for this source, known before anything is written
        "numerics": numerics,
        "reasons": reasons,
    }
    return plan


def example_numerics(target: Path, example: str | None, cfg: dict[str, Any], shapes: dict[str, list[int]],
                     new_encoder: dict[str, Any] | None = None) -> dict[str, Any]:
    """The numerics fields (activation, norm type, gated MLP, linear biases) of the sections the config writer
    starts from (the example's, the new encoder's fields for a new one) against what the source's config and
    weights show (tools/megatron/numerics.py, the facts G3 checks): ``{"compared": {role: [fields]}, "differs":
    [{role, field, have, source, evidence}]}``."""
    out: dict[str, Any] = {"compared": {}, "differs": []}
    try:
        doc = json.loads((Path(target) / example).read_text(encoding="utf-8")) if example else {}
    except (OSError, ValueError) as exc:
        return {**out, "error": f"example {example} not read: {exc}"}
    vision_sub = next((cfg[k] for k in VISION_KEYS if isinstance(cfg.get(k), dict)), None) or {}
    sections = {"text_decoder": (doc.get("text_decoder"), text_config(cfg) or {}),
                "vision_encoder": ((new_encoder or {}).get("json_fields")
                                   or (doc.get("image_encoder") or {}).get("vision_encoder"), vision_sub)}
    for role, (section, sub) in sections.items():
        if not isinstance(section, dict) or not sub:
            continue
        facts = source_numerics(sub, shapes, role)
        out["compared"][role] = sorted(k for k in facts if k in section)
        out["differs"] += [{"role": role, **d} for d in numerics_diff(section, facts)]
    return out


def _feature_norm(ctx: Any, matches: dict[str, ComponentMatch], cfg: dict[str, Any], src: dict[str, Any],
                  reasons: list[str]) -> bool | None:
    """Whether the feature the source reads from its tower's last hidden_states entry has passed the tower's post
    norm, measured in the source's runtime (tools/megatron/feature_norm.py) when a new encoder will be designed for
    a source that reads that entry; None when not asked or not measured (the reason says which)."""
    enc = matches.get("vision_encoder")
    vision = next((cfg[k] for k in VISION_KEYS if isinstance(cfg.get(k), dict)), None)
    if enc is None or enc.model_id or not enc.structure or not vision or not reads_last_entry(cfg, vision):
        return None
    measured = derive_feature_norm(ctx.runtime_python, ctx.source, run_dir=getattr(ctx, "run_dir", None),
                                   trust_remote_code=bool(src.get("needs_trust_remote_code")),
                                   timeout=getattr(ctx, "probe_timeout_s", 300.0))
    reasons.append(f"vision_feature_layer {cfg.get('vision_feature_layer')} (the tower's last hidden_states "
                   f"entry): {measured.evidence()}")
    return measured.post_normed


def _new_encoder(target: Path, matches: dict[str, ComponentMatch], examples: dict[str, Any], cfg: dict[str, Any],
                 shapes: dict[str, list[int]], model_type: str | None, reasons: list[str],
                 feature_post_normed: bool | None = None) -> dict[str, Any] | None:
    """Design the new vision encoder when no registered one builds the source's tower; the match then names the
    new id, and the projector is the one the closest encoder's examples pair it with. ``feature_post_normed``: the
    source's last hidden_states entry carries the tower's post norm (measured; None: not known)."""
    enc = matches.get("vision_encoder")
    vision = next((cfg[k] for k in VISION_KEYS if isinstance(cfg.get(k), dict)), None)
    if enc is None or enc.model_id or not enc.structure or not vision or not model_type:
        return None
    if enc.taps:  # the route stops here rather than drop what the mergers add into the decoder layers
        src_taps = enc.taps["source"]
        why = (f"new vision_encoder not designed: the source's {src_taps['count']} per-layer merger(s) "
               f"{src_taps['list']} add the output of tower layers {src_taps['indexes']} into the first decoder "
               "layers; msmigrate's new encoder builds no per-layer mergers and would silently drop them")
        enc.why += f"; {why}"
        reasons.append(why)
        return None
    design = design_encoder(target, enc.to_dict(), vision, shapes, model_type, cfg, feature_post_normed)
    if design.error:
        reasons.append(f"new vision_encoder not designed: {design.error}")
        return None
    enc.model_id = design.model_id
    enc.why += (f"; new component {design.model_id} ({design.class_name} in {design.module_path}), reusing "
                + "; ".join(f"{k}: {v}" for k, v in design.reuses.items()))
    facts = {k: enc.structure.get(k) for k in ("patch_embed", "learned_position", "class_token")}
    reasons.append(f"new vision_encoder {design.model_id}: built from the source's weights {facts}; not built: "
                   + "; ".join(design.not_built))
    proj = matches.get("vision_projector")
    paired = examples["vision_encoder"].get(enc.closest or "", {}).get("pairs", {}).get("vision_projector")
    # the projector was matched by structure (megatron_components.match_projector) when the source's projector
    # tensors were read; only without them does the closest encoder's pair stand in, unchecked
    if proj is not None and proj.model_id is None and paired and proj.structure is None:
        proj.model_id, proj.example = paired, examples["vision_encoder"][enc.closest]["examples"][0]
        proj.why = (f"vision_projector {paired}: the one the closest encoder {enc.closest} is paired with in "
                    f"{proj.example} (its fit to the source's projector is not checked)")
        reasons.append(proj.why)
    return design.to_dict()


def _new_projector(target: Path, matches: dict[str, ComponentMatch], cfg: dict[str, Any], model_type: str | None,
                   reasons: list[str], new_encoder: dict[str, Any] | None) -> dict[str, Any] | None:
    """Design the new vision projector when the source's projector was read and no registered class builds it;
    the match then names the new id. Its registry entry goes on top of the new encoder's edit of the same file."""
    proj = matches.get("vision_projector")
    if proj is None or proj.model_id or not proj.structure or not model_type:
        return None
    design = design_projector(target, proj.to_dict(), cfg, model_type, text_config(cfg).get("hidden_size"),
                              (new_encoder or {}).get("edits"))
    if design.error:
        reasons.append(f"new vision_projector not designed: {design.error}")
        return None
    proj.model_id = design.model_id
    proj.why += f"; new component {design.model_id} ({design.class_name} in {design.module_path})"
    reasons.append(f"new vision_projector {design.model_id}: built from the source's projector {proj.structure['root']}"
                   f" ({', '.join(f'{k} {v}' for k, v in design.json_fields.items() if k in ('merge', 'pool'))}); "
                   "not built: " + ("; ".join(design.not_built) or "nothing named"))
    return design.to_dict()


# the Megatron data tree's template and mm_plugin registries (and the collator module the writer reads)
MEGATRON_DATA_FILES = ("mindspeed_mm/data/data_utils/func_utils/template.py",
                       "mindspeed_mm/data/data_utils/func_utils/mm_plugin.py",
                       "mindspeed_mm/data/data_utils/func_utils/collator.py")


def template_media_token(target: Path, template: str) -> str | None:
    """The image token the mm_plugin of template ``template`` expands, read by AST from the Megatron data tree's
    template registry (``mm_plugin=get_mm_plugin(..., image_token=...)`` in its registering call)."""
    try:
        tree = ast.parse((Path(target) / MEGATRON_DATA_FILES[0]).read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if isinstance(kw.get("name"), ast.Constant) and kw["name"].value == template and isinstance(
                kw.get("mm_plugin"), ast.Call):
            token = {k.arg: k.value for k in kw["mm_plugin"].keywords}.get("image_token")
            return token.value if isinstance(token, ast.Constant) else None
    return None


def data_branch(target: Path, data_json: str | None, expansion: MediaExpansion | None, name: str
                ) -> dict[str, str] | None:
    """Branch B when the example data JSON's template expands another image token than the source's processor
    makes of an image (then its mm_plugin cannot expand the source's samples): a new template named after the
    model, from the source's chat template, with a plugin running the source's processor."""
    if not data_json or expansion is None or not expansion.ok or not expansion.media_token:
        return None
    try:
        example = json.loads((Path(target) / data_json).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    template = ((example.get("dataset_param") or {}).get("basic_parameters") or {}).get("template")
    token = template_media_token(target, template) if template else None
    if token is None or token == expansion.media_token:
        return None
    return {"template": name, "why": (
        f"data branch B: the example's template {template!r} expands {token!r} in its mm_plugin, the source's "
        f"processor makes {expansion.media_token!r} of an image: a template {name!r} from the source's chat "
        "template and an mm_plugin running the source's processor are registered in the Megatron data tree")}


def _new_converter(target: Path, matches: dict[str, ComponentMatch], cfg: dict[str, Any],
                   shapes: dict[str, list[int]], model_type: str | None, new_encoder: dict[str, Any],
                   reasons: list[str]) -> dict[str, Any] | None:
    """Design the weight converter the target lacks for this model_type (new_converter.py), for a source whose
    decoder is reused and whose encoder the model phase writes; None (with why in the reasons) when it cannot."""
    dec, proj = matches.get("text_decoder"), matches.get("vision_projector")
    vision = next((cfg[k] for k in VISION_KEYS if isinstance(cfg.get(k), dict)), None)
    if not model_type or dec is None or not dec.model_id or vision is None:
        reasons.append("no weight converter designed: it needs a reused text decoder and the source's vision config")
        return None
    design = design_converter(target, model_type, shapes, new_encoder, (proj.structure or {}).get("root")
                              if proj else None, text_config(cfg) or {}, vision)
    if design.error:
        reasons.append(f"no weight converter designed: {design.error}")
        return None
    reasons.append(f"new weight converter {design.class_name} ({design.module_path}, offered by mm-convert through "
                   f"{', '.join(design.edits)}): renames derived from the source's weight names and the new "
                   f"encoder's class" + (f"; dropped (no module builds them): {design.dropped}" if design.dropped
                                         else ""))
    return design.to_dict()


def registered_components(target: Path) -> tuple[dict[str, set[str]] | None, str]:
    """role -> model_ids the target's registries hold (read by AST), or None with why (then examples alone count)."""
    reg = read_registry(target)
    if reg.error:
        return None, f"registries not read ({reg.error}): components judged from the examples alone"
    out = {role: reg.ids_for(role) for role in ("vision_encoder", "vision_projector", "text_decoder")}
    if not any(out.values()):
        return None, "no registry traced to a sub-module role: components judged from the examples alone"
    return out, "registered ids: " + "; ".join(f"{r} {sorted(v)}" for r, v in out.items() if v)


def _base_match(matches: dict[str, ComponentMatch]) -> ComponentMatch | None:
    """The example a migration starts from: the text decoder's when it matched (it carries most of the launch
    settings), else the vision encoder's."""
    for role in ("text_decoder", "vision_encoder"):
        m = matches.get(role)
        if m is not None and m.model_id and m.example:
            return m
    return None


def _prefer_launchable_example(matches: dict[str, ComponentMatch], examples: dict[str, dict[str, Any]],
                               target: Path) -> None:
    """A matched component whose chosen example no torchrun script of pretrain_vlm.py launches (a MindSpore
    example first in order) starts from one of its examples that such a script does launch, when it has one: the
    launch script and data JSON come from that example's folder."""
    for role in ("text_decoder", "vision_encoder"):
        m = matches.get(role)
        if m is None or not m.model_id or not m.example or example_script(target, m.example)[0]:
            continue
        launchable = [e for e in (examples.get(role, {}).get(m.model_id) or {}).get("examples", [])
                      if example_script(target, e)[0]]
        if launchable:
            m.example = launchable[0]


def _prefer_shared_example(matches: dict[str, ComponentMatch], examples: dict[str, dict[str, Any]],
                           target: Path) -> None:
    """Point the decoder and encoder at one example JSON that holds both matched ids, when the target has one."""
    dec, enc = matches.get("text_decoder"), matches.get("vision_encoder")
    if not (dec and enc and dec.model_id and enc.model_id):
        return
    shared = sorted(set(examples["text_decoder"][dec.model_id]["examples"])
                    & set(examples["vision_encoder"][enc.model_id]["examples"]))
    # the first one a torchrun launch script of pretrain_vlm.py passes (the config gate reads that shape)
    launchable = [e for e in shared if example_script(target, e)[0]] or shared
    if launchable:
        dec.example = enc.example = launchable[0]
