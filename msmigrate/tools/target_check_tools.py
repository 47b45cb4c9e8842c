"""Policy-facing wrappers of ``target_checks``: the same checks the gates run, bound to one run."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from msmigrate.tools.module_plan import (apply_modules_from_tree, block_lists, recompute_blocked, recompute_from_tree,
                                         root_unit_modules)
from msmigrate.core.tool_result import ToolResult, make_tool
from msmigrate.core.run_context import RunContext
from msmigrate.tools.target_checks import config_check, data_check, forward_check, module_tree


class InspectModelArgs(BaseModel):
    where: str = Field("plugin", description="'plugin': the class registered in the target under model_id, loaded "
                                             "through the given plugin dirs as the trainer would; 'source': the "
                                             "source model folder itself.")
    model_id: str = Field("", description="model_register id (where='plugin').")
    plugins: list[str] = Field(default_factory=list, description="training.plugin entries to import.")
    trust_remote_code: bool = Field(False, description="The source needs trust_remote_code (auto_map custom code).")


class ConfigPathArgs(BaseModel):
    config_path: str = Field(description="Plugin-route YAML relative to the target root, e.g. examples/<name>/<name>_config.yaml")
    model_id: str = Field("", description="model_id whose module tree the patterns are audited against.")
    plugins: list[str] = Field(default_factory=list, description="training.plugin entries to import.")
    trust_remote_code: bool = Field(False, description="The source needs trust_remote_code (auto_map custom code).")


class ForwardArgs(BaseModel):
    model_id: str = Field(description="model_register id.")
    plugins: list[str] = Field(description="training.plugin entries to import.")
    use_collated_batch: bool = Field(False, description="Use the batch saved by the last check_data call instead "
                                                        "of a synthetic text batch.")
    trust_remote_code: bool = Field(False, description="The source needs trust_remote_code (auto_map custom code).")


def inspect_model(ctx: RunContext, where: str = "plugin", model_id: str = "", plugins: list[str] | None = None,
                  trust_remote_code: bool = False) -> ToolResult:
    if where not in ("plugin", "source"):
        return ToolResult.failure("where must be 'plugin' or 'source'")
    if where == "plugin" and not model_id:
        return ToolResult.failure("where='plugin' needs model_id and plugins")
    res = module_tree(ctx, plugins=plugins or [], model_id=model_id if where == "plugin" else None,
                      trust_remote_code=trust_remote_code)
    if not res.ok:
        return res
    tree = res.data["result"]
    names = tree["names"]
    suggested = apply_modules_from_tree(tree)
    return ToolResult.success(
        tree_file=res.data["saved"], num_modules=len(names), model_class=tree.get("model_class"),
        attention_support=tree.get("attention_support"),  # what model.attn_implementation may ask for
        no_split_modules=tree.get("no_split_modules"),
        block_lists=[{"path": p, "block_class": c} for p, c in block_lists(tree)],
        suggested_apply_modules=suggested, suggested_recompute=recompute_from_tree(tree),
        recompute_left_out=recompute_blocked(tree),
        # the trainer wraps the listed modules, then the whole model: the rest is the root unit's (tied weights must be)
        left_to_root_unit=root_unit_modules(tree, suggested), tied_embeddings=bool(tree.get("tied_embeddings")),
        top_level=[n for n in names if n and n.count(".") <= 1][:60],
    )


def check_config(ctx: RunContext, config_path: str, model_id: str = "", plugins: list[str] | None = None,
                 trust_remote_code: bool = False) -> ToolResult:
    path = (ctx.target / config_path).resolve()
    if not path.is_file():
        return ToolResult.failure(f"{config_path} not found under the target")
    tree = None
    if model_id:
        res = module_tree(ctx, plugins=plugins or [], model_id=model_id, trust_remote_code=trust_remote_code)
        if not res.ok:
            return ToolResult.failure(f"cannot build {model_id} for the pattern audit: {res.error}", **res.data)
        tree = res.data["result"]
    return config_check(ctx, path, tree=tree)


def check_data(ctx: RunContext, config_path: str, model_id: str = "", plugins: list[str] | None = None,
               trust_remote_code: bool = False) -> ToolResult:
    path = (ctx.target / config_path).resolve()
    if not path.is_file():
        return ToolResult.failure(f"{config_path} not found under the target")
    # the same data parity G2 runs, with the same inputs from the run's plan: an "ok" here means G2's parity holds
    plan = getattr(ctx, "plan", None) or {}
    res = data_check(ctx, path, parity_data=ctx.data_path,
                     media_token_id=(plan.get("media_expansion") or {}).get("media_token_id"),
                     trust_remote_code=trust_remote_code or plan.get("route") == "custom",
                     source_training=plan.get("source_training"))
    parity = (res.data.get("result") or {}).get("parity") if res.ok else None
    redrawn = ((res.data.get("result") or {}).get("redraw") or {}).get("problems") if res.ok else None
    if redrawn:  # G2 fails on it too (tools/probes/_redraw.py)
        return ToolResult.failure("the pipeline runs once, but not twice: " + " | ".join(redrawn), **res.data)
    if parity and not parity.get("passed"):
        problems = parity.get("problems") or [parity.get("error") or "no sample compared"]
        return ToolResult.failure("the pipeline runs, but G2's data parity fails (" + (parity.get("oracle") or
                                  "the source's own processing") + "): " + " | ".join(problems[:6]), **res.data)
    return res


def check_forward(ctx: RunContext, model_id: str, plugins: list[str], use_collated_batch: bool = False,
                  trust_remote_code: bool = False) -> ToolResult:
    batch = ctx.run_dir / "probes" / "batch.pt"
    if use_collated_batch and not batch.is_file():
        return ToolResult.failure("no collated batch yet: call check_data first")
    return forward_check(ctx, plugins=plugins, model_id=model_id, batch_file=str(batch) if use_collated_batch else None,
                         trust_remote_code=trust_remote_code)


def target_check_tools(ctx: RunContext) -> list:
    return [
        make_tool("inspect_model", "Build the model on the meta device in the target runtime and list its module "
                  "tree summary: block lists, _no_split_modules, suggested apply_modules / recompute patterns.",
                  InspectModelArgs, lambda **kw: inspect_model(ctx, **kw)),
        make_tool("check_config", "Run gate G3's strict validation of a YAML now (schema from the target's own "
                  "argument models, registries, plugin paths, pattern audit against the real module tree).",
                  ConfigPathArgs, lambda **kw: check_config(ctx, **kw)),
        make_tool("check_data", "Run gate G2's data pipeline now: dataset_type → attr mapping → template + mm_plugin "
                  "→ collator on real samples, and G2's data parity against the source's own processing (its "
                  "training code where it has one); returns batch keys and shapes, and saves the batch.",
                  ConfigPathArgs, lambda **kw: check_data(ctx, **kw)),
        make_tool("check_forward", "One forward with labels through the plugin class (shrunk config) on a "
                  "synthetic or the last collated batch: the loss and whether it is finite. Also builds it both ways "
                  "init_model_with_meta_device does (meta, the trainer's storage call, NaN-filled storage): "
                  "meta_fresh (a config without training.load: init_weights runs) and meta_load (init_weights "
                  "skipped, weights loaded: what the delivered config and G4–G6 train), naming each path's first non-finite tensor.",
                  ForwardArgs, lambda **kw: check_forward(ctx, **kw)),
    ]
