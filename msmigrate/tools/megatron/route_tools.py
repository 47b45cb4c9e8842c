"""The Megatron route's check tools, as typed tools for a policy (the LLM policy's phases on the route; the rules
policy calls the same ones). Each runs the core its phase gate runs, so a tool's answer is what the gate will say:

- ``convert_weights`` (model phase): the weight-converter step, HF -> Megatron layout -> HF on a tiny model built
  from the source's config, at the launch's TP (and PP) size; the target's own converter where the target has one
  for the source's model_type, else msmigrate's layout round trip, and the result says which ran;
- ``check_megatron_data`` (data phase): the data JSON (``--mm-data``) against the files it names, the plan's
  ``get_batch`` contract (the fields the assembled model's forward consumes) and the source's own chat template
  (the template the JSON names, as the target registers it: tools/megatron/template_parity.py);
- ``check_parallel_sizes`` (config phase): TP / PP / CP / VPP and the batch arithmetic against the source's heads,
  KV heads and layers, before a model JSON or launch script is written;
- ``check_megatron_config`` (config phase): the model JSON and the launch script the way G3 checks them (entry,
  ``--mm-model`` / ``--mm-data``, flags against the framework's own add_argument definitions, registered
  ``model_id`` per sub-module, pipeline_num_layers per stage, heads by TP, fields equal to the source's).

Expected failures (a size that does not divide the model, a JSON that names a missing file) are results with
``ok: false`` and ``error``: the model reads them and repairs. What the tools read of the plan comes from
``RunContext.plan`` (the tools node sets it from the run state at every call).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from msmigrate.core.run_context import RunContext
from msmigrate.core.tool_result import ToolResult, make_tool
from msmigrate.tools.megatron.config_check import check_megatron_config
from msmigrate.tools.megatron.converter_roundtrip import target_converter_roundtrip
from msmigrate.tools.megatron.converters import converter_candidates
from msmigrate.tools.megatron.data_json import check_data_json
from msmigrate.tools.megatron.template_parity import template_parity
from msmigrate.tools.megatron.parallel_check import ParallelSizes, check_parallel_for_source
from msmigrate.tools.megatron.weight_roundtrip import converter_roundtrip

CONVERT_TOOL = "convert_weights"
DATA_TOOL = "check_megatron_data"
SIZES_TOOL = "check_parallel_sizes"
CONFIG_TOOL = "check_megatron_config"
MEGATRON_TOOLS = (CONVERT_TOOL, DATA_TOOL, SIZES_TOOL, CONFIG_TOOL)


class ConvertWeightsArgs(BaseModel):
    tp: int = Field(1, ge=1, description="Tensor-parallel size of the launch: the HF weights are split into this "
                                         "many per-rank shards and merged back.")
    pp: int = Field(1, ge=1, description="Pipeline-parallel size of the launch (stages of the text decoder's "
                                         "layers).")
    output_dir: str = Field("", description="Scratch folder name for the round trip's tiny checkpoint, kept under "
                                            "the run dir (never the target); empty: 'convert_weights'.")


class DataJsonArgs(BaseModel):
    data_json: str = Field(description="The data JSON (--mm-data) relative to the target root, e.g. "
                                       "examples/<name>/data_<name>.json.")


class SizesArgs(BaseModel):
    tp: int = Field(1, description="Tensor-parallel size (splits attention heads and KV heads).")
    pp: int = Field(1, description="Pipeline-parallel size (splits the text decoder's layers into stages).")
    cp: int = Field(1, description="Context-parallel size.")
    vpp: int = Field(1, description="Virtual pipeline stages per pipeline rank (needs pp > 1).")
    world_size: int | None = Field(None, description="Ranks of the launch (nodes x processes per node); empty: "
                                                     "tp x pp x cp (data-parallel size 1).")
    micro_batch_size: int = Field(1, description="--micro-batch-size of the launch.")
    global_batch_size: int | None = Field(None, description="--global-batch-size of the launch; must be a multiple "
                                                            "of micro batch x data-parallel size.")


class MegatronConfigArgs(BaseModel):
    model_json: str = Field(description="The model JSON (--mm-model) relative to the target root.")
    script: str = Field(description="The launch script relative to the target root; it must pass model_json as "
                                    "--mm-model to pretrain_vlm.py.")


def _inside(base: Path, name: str) -> Path | None:
    """``base/name`` when it stays inside ``base`` (a scratch folder the model names), else None."""
    path = (base / (name.strip("/") or "convert_weights")).resolve()
    return path if path == base.resolve() or base.resolve() in path.parents else None


def _source_model_type(ctx: RunContext) -> str | None:
    try:
        return json.loads((Path(ctx.source) / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None


def convert_weights(ctx: RunContext, tp: int = 1, pp: int = 1, output_dir: str = "") -> ToolResult:
    sizes = check_parallel_for_source(ctx.source, ParallelSizes(tp=tp, pp=pp))
    if sizes.error or sizes.problems:
        return ToolResult.failure(sizes.error or "; ".join(sizes.problems), model=sizes.facts)
    work = _inside(Path(ctx.run_dir) / "convert_weights", output_dir)
    if work is None:
        return ToolResult.failure(f"output_dir {output_dir!r} leaves the run's scratch folder")
    plan = ctx.plan or {}
    planned = plan.get("parallel") or {}
    notes = [f"the plan's launch has {k}={planned[k]}, this call {k}={v}: G1 round-trips at the launch's sizes"
             for k, v in (("tp", tp), ("pp", pp)) if planned.get(k) not in (None, v)]
    model_type = plan.get("model_type") or _source_model_type(ctx)
    converter = plan.get("converter") or converter_candidates(ctx.target, model_type).best
    if converter:
        res = target_converter_roundtrip(ctx.runtime_python, ctx.target, converter, work, shrink_source=ctx.source,
                                         tp=tp, pp=pp, taps=plan.get("encoder_taps"),
                                         timeout=max(600.0, ctx.probe_timeout_s))  # converter: 600 s floor
        if res.ok:
            return ToolResult.success(converter_used="target", converter=converter, facts=res.facts, ran=res.ran,
                                      stubbed=res.stubbed, notes=notes)
        if not (res.error and res.facts.get("missing_module")):
            return ToolResult.failure(res.error or "; ".join(res.problems), converter=converter,
                                      problems=res.problems, facts=res.facts, notes=notes)
        notes.append(f"{converter} not importable here ({res.error}): msmigrate's layout round trip instead")
    else:
        notes.append(f"no converter in the target imports transformers.models.{model_type}: msmigrate's layout "
                     "round trip (the layout convention only; the real weights need a converter)")
    own = converter_roundtrip(ctx.runtime_python, ctx.source, tp=tp, timeout=ctx.probe_timeout_s)
    if own.error or own.problems:
        return ToolResult.failure(own.error or "; ".join(own.problems), converter_used="msmigrate",
                                  facts=own.facts, notes=notes)
    return ToolResult.success(converter_used="msmigrate", converter=converter, facts=own.facts, notes=notes)


def check_megatron_data(ctx: RunContext, data_json: str) -> ToolResult:
    contract = (ctx.plan or {}).get("batch_contract") or {}
    problems, warnings, facts = check_data_json(ctx.target, data_json, contract)
    # the chat format against the source's own template, as G2 checks it (a file that did not read has nothing
    # to compare yet)
    if not any(p.startswith("cannot read") for p in problems):
        par = template_parity(ctx.runtime_python, ctx.target, data_json, ctx.source,
                              timeout=ctx.probe_timeout_s)
        facts["data_parity"] = par.facts
        problems += [f"data parity not proven: {par.error}"] if par.error else [
            f"data parity: {p}" for p in par.problems]
    if problems:
        return ToolResult.failure("; ".join(problems), problems=problems, warnings=warnings, facts=facts)
    return ToolResult.success(facts=facts, warnings=warnings)


def check_parallel_sizes(ctx: RunContext, tp: int = 1, pp: int = 1, cp: int = 1, vpp: int = 1,
                         world_size: int | None = None, micro_batch_size: int = 1,
                         global_batch_size: int | None = None) -> ToolResult:
    res = check_parallel_for_source(ctx.source, ParallelSizes(
        tp=tp, pp=pp, cp=cp, vpp=vpp, world_size=world_size if world_size is not None else tp * pp * cp,
        micro_batch_size=micro_batch_size, global_batch_size=global_batch_size))
    if res.error or res.problems:
        return ToolResult.failure(res.error or "; ".join(res.problems), problems=res.problems, facts=res.facts)
    return ToolResult.success(facts=res.facts)


def check_megatron_config_tool(ctx: RunContext, model_json: str, script: str) -> ToolResult:
    res = check_megatron_config(ctx.target, model_json, script, source=ctx.source)
    data = {"problems": res.problems, "warnings": res.warnings, "facts": res.facts,
            "unverified_flags": res.unverified_flags}
    if res.error or not res.ok:
        return ToolResult.failure(res.error or "; ".join(res.problems), **data)
    return ToolResult.success(**data)


def megatron_tools(ctx: RunContext) -> list:
    return [
        make_tool(CONVERT_TOOL, "Megatron route, model phase: the weight-converter step. Converts a tiny model "
                                "built from the source's config HF -> Megatron layout (split over tp ranks and pp stages) -> HF "
                                "with the target's converter for the source's model_type (msmigrate's layout "
                                "round trip when the target has none) and reports whether every tensor came back "
                                "identical. G1 runs the same round trip.",
                  ConvertWeightsArgs, lambda tp=1, pp=1, output_dir="": convert_weights(ctx, tp, pp, output_dir)),
        make_tool(DATA_TOOL, "Megatron route, data phase: check a data JSON (--mm-data) as G2 will: dataset_param "
                             "with dataset_type, model_name_or_path an HF folder, dataset records whose images "
                             "resolve, and the plan's get_batch contract (fields the model's forward consumes).",
                  DataJsonArgs, lambda data_json: check_megatron_data(ctx, data_json)),
        make_tool(SIZES_TOOL, "Megatron route, config phase: check TP/PP/CP/VPP and the batch arithmetic against "
                              "the source's attention heads, KV heads and layers before writing the launch.",
                  SizesArgs, lambda **kw: check_parallel_sizes(ctx, **kw)),
        make_tool(CONFIG_TOOL, "Megatron route, config phase: check the model JSON and launch script as G3 will "
                               "(entry and --mm-model/--mm-data, flags against the framework's add_argument "
                               "definitions, registered model_id per sub-module, pipeline_num_layers per stage, "
                               "heads divisible by TP, fields equal to the source's config).",
                  MegatronConfigArgs, lambda model_json, script: check_megatron_config_tool(ctx, model_json, script)),
    ]
