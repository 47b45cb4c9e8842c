"""Static check of a Megatron-route configuration: the model JSON and the launch script that runs it, against the
target's own code (registries, argument definitions) and, when given, the source's HF config.json. No torch.

What is checked, each from evidence the files give:
- the script launches the route's entry (pretrain_vlm.py by default) with ``--mm-model`` = the model JSON and an
  existing ``--mm-data`` file; its flags against the framework's add_argument definitions (arg_definitions.py:
  flags no read file defines are *unverified*, never wrong; Megatron-LM's own are outside the snapshots);
- every sub-module's ``model_id`` is registered for its role in the target (registry.py);
- parallel arithmetic with the script's TP / PP / VPP / CP / micro / global batch and world size: attention heads
  and query groups divisible by TP (and heads by CP, Ulysses splits heads), ``pipeline_num_layers`` with one
  entry per pipeline stage (PP, or VPP lists of PP) summing to ``num_layers``, the global batch a multiple of
  micro x DP (pipeline_num_layers only when PP > 1: VLMModel ignores it otherwise);
- with the source: the text decoder's and vision encoder's layer count, width, heads, query groups and vocab
  equal the HF config's (a model JSON copied from a neighbouring size of the family is the usual slip), and their
  numerics fields the section has (activation, norm type, gated MLP, linear biases) equal what the source's
  config and weights show (numerics.py; a JSON copied from a neighbouring family's example is that slip).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from msmigrate.tools.megatron.arg_definitions import check_script_flags, refused_flags, script_flags
from msmigrate.tools.megatron.encoder_structure import weight_shapes
from msmigrate.tools.megatron.launch_script import LaunchScript, parse_launch_script
from msmigrate.tools.megatron.numerics import numerics_problems, source_numerics
from msmigrate.tools.megatron.parallel_check import text_config
from msmigrate.tools.megatron.registry import read_registry

ENTRY = "pretrain_vlm.py"
# Files that extend the training parser, where a target has them (arg_definitions.py says why only these):
# MindSpeed-MM's, MindSpeed's (a sibling checkout or a copy inside the target) and Megatron-LM's own when present.
DEFINITION_FILES = ("mindspeed_mm/arguments.py", "mindspeed_mm/configs", "mindspeed/arguments.py",
                    "mindspeed/features_manager", "megatron/training/arguments.py")
# Sub-modules of a VLM model JSON: path -> the role name registries are traced to.
SUB_MODULES = {("image_encoder", "vision_encoder"): "vision_encoder",
               ("image_encoder", "vision_projector"): "vision_projector",
               ("audio_encoder", "audio_encoder"): "audio_encoder", ("text_decoder",): "text_decoder"}
# Which JSON field must equal which HF field, per sub-module (HF alternatives in order).
SOURCE_FIELDS = {"text_decoder": {"num_layers": ("num_hidden_layers",), "hidden_size": ("hidden_size",),
                                  "num_attention_heads": ("num_attention_heads",),
                                  "num_query_groups": ("num_key_value_heads",), "vocab_size": ("vocab_size",)},
                 "vision_encoder": {"num_layers": ("depth", "num_hidden_layers"),
                                    # Qwen2-VL's ViT width is embed_dim (its hidden_size is the merger's output,
                                    # the LLM width): the real checkpoint/ converter reads embed_dim for it
                                    "hidden_size": ("embed_dim", "hidden_size"),
                                    "num_attention_heads": ("num_heads", "num_attention_heads")}}


@dataclass
class MegatronConfigCheck:
    ok: bool = False
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # sizes, dp, grad accumulation, model ids, files read
    unverified_flags: list[str] = field(default_factory=list)
    error: str | None = None  # an input could not be read at all

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_model_config(path: Path) -> Any:
    """The model config the way MindSpeed-MM's MMConfig reads it: a .json file whole, a .yaml file's ``model`` key
    (one YAML may hold the model, data and tool sections)."""
    text = Path(path).read_text(encoding="utf-8")
    if str(path).endswith(".yaml"):
        doc = yaml.safe_load(text)
        if not isinstance(doc, dict) or "model" not in doc:
            raise ValueError(f"{path}: a YAML model config needs a top-level 'model' key")
        return doc["model"]
    return json.loads(text)


def definition_paths(target: Path, extra: list[Path] | None = None) -> list[Path]:
    """The parser-extending files present in ``target`` (plus ``extra``, e.g. a MindSpeed checkout next to it)."""
    found = [Path(target) / rel for rel in DEFINITION_FILES if (Path(target) / rel).exists()]
    for base in extra or []:
        found += [Path(base) / rel for rel in DEFINITION_FILES if (Path(base) / rel).exists()]
    return found


def _sub(model: dict, path: tuple[str, ...]) -> dict | None:
    node: Any = model
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def _sizes(script: LaunchScript) -> dict[str, int | None]:
    nproc = script.launcher_args.get("--nproc_per_node")
    nnodes = script.launcher_args.get("--nnodes", "1")
    world = int(nproc) * int(nnodes) if str(nproc).isdigit() and str(nnodes).isdigit() else None
    return {"tp": script.int_flag("--tensor-model-parallel-size", 1),
            "pp": script.int_flag("--pipeline-model-parallel-size", 1),
            "vpp": script.int_flag("--virtual-pipeline-model-parallel-size", 1),
            "cp": script.int_flag("--context-parallel-size", 1), "mbs": script.int_flag("--micro-batch-size", 1),
            "gbs": script.int_flag("--global-batch-size"), "world": world}


def _check_stages(name: str, sub: dict, pp: int, vpp: int, problems: list[str]) -> None:
    layers, stages = sub.get("num_layers"), sub.get("pipeline_num_layers")
    if pp == 1 and vpp == 1:
        return  # VLMModel reads pipeline_num_layers only when pp > 1 (examples reuse one JSON with and without PP)
    if stages is None:
        problems.append(f"{name}: pp={pp} but no pipeline_num_layers (one layer count per stage)")
        return
    flat = [x for s in stages for x in (s if isinstance(s, list) else [s])]
    if not all(isinstance(x, int) and x >= 0 for x in flat):
        problems.append(f"{name}.pipeline_num_layers {stages} must hold non-negative integers")
        return
    nested = bool(stages) and isinstance(stages[0], list)
    if nested and (len(stages) != vpp or any(len(s) != pp for s in stages)):
        problems.append(f"{name}.pipeline_num_layers {stages} must be {vpp} lists of {pp} (vpp x pp)")
    elif not nested and (len(stages) != pp or vpp > 1):
        problems.append(f"{name}.pipeline_num_layers {stages} has {len(stages)} stage(s), the script has pp={pp}"
                        + (f" and vpp={vpp} (needs {vpp} lists of {pp})" if vpp > 1 else ""))
    if isinstance(layers, int) and sum(flat) != layers:
        problems.append(f"{name}.pipeline_num_layers {stages} sums to {sum(flat)}, num_layers is {layers}")


def _check_heads(name: str, sub: dict, tp: int, cp: int, problems: list[str]) -> None:
    heads = sub.get("num_attention_heads")
    if not isinstance(heads, int):
        return
    groups = sub.get("num_query_groups") if sub.get("group_query_attention") else None
    if heads % tp:
        problems.append(f"{name}.num_attention_heads {heads} is not divisible by tp {tp}")
    if isinstance(groups, int) and groups % tp:
        problems.append(f"{name}.num_query_groups {groups} is not divisible by tp {tp} (each TP rank needs whole "
                        "KV groups)")
    if isinstance(groups, int) and heads % groups:
        problems.append(f"{name}.num_attention_heads {heads} is not a multiple of num_query_groups {groups}")
    if cp > 1 and heads % cp:
        problems.append(f"{name}.num_attention_heads {heads} is not divisible by cp {cp} (Ulysses splits heads)")
    hidden = sub.get("hidden_size")
    if isinstance(hidden, int) and hidden % heads and "kv_channels" not in sub:
        problems.append(f"{name}.hidden_size {hidden} is not divisible by num_attention_heads {heads} "
                        "(set kv_channels for a head size of its own)")


def _check_source(model: dict, source_cfg: dict, problems: list[str],
                  shapes: dict[str, list[int]] | None = None) -> None:
    hf = {"text_decoder": text_config(source_cfg), "vision_encoder": source_cfg.get("vision_config") or {}}
    for role, fields in SOURCE_FIELDS.items():
        sub = model.get("text_decoder") if role == "text_decoder" else _sub(model, ("image_encoder", role))
        if not sub or not hf[role]:
            continue
        problems += numerics_problems(role, sub, source_numerics(hf[role], shapes or {}, role))
        for key, hf_keys in fields.items():
            want = next((hf[role][k] for k in hf_keys if k in hf[role]), None)
            have = sub.get(key)
            if key == "num_query_groups" and not sub.get("group_query_attention"):
                have = sub.get("num_attention_heads")  # without GQA every head is its own group
            if want is not None and have is not None and have != want:
                problems.append(f"{role}.{key} is {have}, the source config has {hf_keys[0]} = {want}")


def check_megatron_config(target: Path, model_json: Path, script: Path, *, source: Path | None = None,
                          entry: str = ENTRY, definitions: list[Path] | None = None) -> MegatronConfigCheck:
    """``model_json`` / ``script``: paths inside ``target`` (absolute or relative to it); ``source``: the HF
    folder whose config.json the model JSON must describe; ``definitions``: parser files (default: those in the
    target, see DEFINITION_FILES)."""
    target = Path(target)
    model_path, script_path = target / model_json, target / script
    try:
        model = read_model_config(model_path)
        text = script_path.read_text(encoding="utf-8")
    except (OSError, ValueError, yaml.YAMLError) as exc:
        return MegatronConfigCheck(error=f"cannot read the model config or the script: {exc}")
    if not isinstance(model, dict):
        return MegatronConfigCheck(error=f"{model_json} is not a JSON / YAML mapping")
    out = MegatronConfigCheck()
    p, w = out.problems, out.warnings
    launch = parse_launch_script(text)
    if launch.error:
        p.append(f"{script}: {launch.error}")
    elif Path(launch.entry).name != Path(entry).name:
        p.append(f"{script} launches {launch.entry}, not {entry}")
    if launch.unresolved:
        w.append(f"{script}: left unexpanded: {', '.join(launch.unresolved)}")
    mm_model = launch.flags.get("--mm-model")
    if not isinstance(mm_model, str) or (target / mm_model).resolve() != model_path.resolve():
        p.append(f"{script} passes --mm-model {mm_model!r}, not {model_json}")
    mm_data = launch.flags.get("--mm-data")
    if not isinstance(mm_data, str) or not (target / mm_data).is_file():
        p.append(f"{script}: --mm-data {mm_data!r} is not a file in the target")
    paths = definitions if definitions is not None else definition_paths(target)
    if paths:
        flags = check_script_flags(script_path, paths)
        if flags.error:
            w.append(f"flags not checked against the framework: {flags.error}")
        out.unverified_flags = flags.unverified
        out.facts["flag_definition_files"] = flags.files_read
    else:
        w.append("no argument-definition files in the target: no flag was checked")
    refused = refused_flags(target / "mindspeed_mm")
    p += [f"{script} passes {flag}, which the framework refuses ({refused[flag]})"
          for flag in script_flags(script_path.read_text(encoding="utf-8", errors="replace")) if flag in refused]
    reg = read_registry(target)
    if reg.error:
        p.append(f"registries not read: {reg.error}")
    sizes = _sizes(launch)
    out.facts.update(sizes=sizes, model_ids={})
    for path, role in SUB_MODULES.items():
        sub = _sub(model, path)
        if sub is None:
            continue
        name = ".".join(path)
        mid = sub.get("model_id")
        out.facts["model_ids"][name] = mid
        if not reg.error:
            known = reg.ids_for(role)
            if not reg.for_role(role):
                w.append(f"{name}: the target has no registry traced to the role {role}; model_id not checked")
            elif mid not in known:
                p.append(f"{name}.model_id {mid!r} is not registered for {role} in the target (known: "
                         f"{sorted(known)})")
        if role != "vision_projector":
            _check_stages(name, sub, sizes["pp"], sizes["vpp"], p)
            _check_heads(name, sub, sizes["tp"], 1 if role == "vision_projector" else sizes["cp"], p)
    model_par = sizes["tp"] * sizes["pp"] * sizes["cp"]
    if sizes["world"] is not None:
        if sizes["world"] % model_par:
            p.append(f"world size {sizes['world']} is not divisible by tp x pp x cp = {model_par}")
        else:
            dp = sizes["world"] // model_par
            out.facts["dp"] = dp
            if sizes["gbs"] is not None and sizes["gbs"] % (sizes["mbs"] * dp):
                p.append(f"global batch {sizes['gbs']} is not a multiple of micro batch x dp = {sizes['mbs']} x {dp}")
            elif sizes["gbs"] is not None:
                out.facts["grad_accum"] = sizes["gbs"] // (sizes["mbs"] * dp)
    if source is not None:
        try:
            source_cfg = json.loads((Path(source) / "config.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            return MegatronConfigCheck(error=f"cannot read {source}/config.json: {exc}")
        _check_source(model, source_cfg, p, weight_shapes(Path(source)))
    out.ok = not p
    return out
