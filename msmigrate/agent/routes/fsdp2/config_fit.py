"""What of the similar example's YAML applies to the model being migrated (decided from the model, not copied).

The most similar example in a real checkout is often a large MoE config (expert parallelism and its ep_plan, hook
modules, chunk loss, activation offload, grouped-expert kernels). A dense model needs none of that; this module
keeps from the baseline only what the new model's own facts support:

- expert parallelism and everything about experts only when the model has experts (``experts`` modules in its real
  module tree, or an expert count > 0 in its config.json);
- model-section knobs of the example's class (``gdn_implementation`` …) only when the new model's config.json has a
  key of that name; the argument model's own keys always stay;
- module patterns of optional plans (``hook_modules``, offload, chunk-mbs) only where they match the new model's
  tree; memory features sized for the example (activation offload, chunk loss, chunk mbs, expert balancing) are off
  in a draft — a working first config, which the user can tune on the accelerator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from msmigrate.tools import yaml_roundtrip as rt
from msmigrate.tools.module_match import module_name_match

# ModelArguments' own fields in the plugin route (contract §6.1); anything else in `model:` is read by a model class.
MODEL_ARGUMENT_KEYS = ("model_id", "model_name_or_path", "trust_remote_code", "attn_implementation", "freeze",
                       "mtp_num_layers", "mtp_loss_scaling_factor")
EXPERT_COUNT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")
# feature switch -> its plan section: memory features the draft turns off
DRAFT_OFF_FEATURES = {"enable_activation_offload": "activation_offload_plan", "enable_chunk_loss": "chunkloss_plan",
                      "enable_dynamic_chunk_loss": None, "enable_chunk_mbs": "chunkmbs_plan",
                      "enable_ep_balance": "ep_balance_plan"}


def _config_keys(source: Path) -> tuple[set[str], bool]:
    """(every key anywhere in config.json, whether it declares experts)."""
    try:
        cfg = json.loads((Path(source) / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return set(), False
    keys: set[str] = set()
    experts = False

    def walk(node: Any) -> None:
        nonlocal experts
        if isinstance(node, dict):
            for k, v in node.items():
                keys.add(k)
                if k in EXPERT_COUNT_KEYS and isinstance(v, int) and v > 0:
                    experts = True
                walk(v)

    walk(cfg)
    return keys, experts


def has_experts(tree: dict[str, Any], source: Path) -> bool:
    names = tree.get("names") or []
    if any("experts" in n.split(".") for n in names):
        return True
    return _config_keys(source)[1]


def _matching(patterns: list[Any], names: list[str]) -> list[Any]:
    return [p for p in patterns if isinstance(p, str) and any(module_name_match(p, n) for n in names)]


def fit_to_model(cfg: dict[str, Any], *, tree: dict[str, Any], source: Path) -> list[str]:
    """Trim ``cfg`` (a copy of the baseline) in place to what applies; returns what was dropped, with why."""
    dropped: list[str] = []
    config_keys, _ = _config_keys(source)
    names = tree.get("names") or []
    model = cfg.get("model") or {}
    for key in [k for k in model if k not in MODEL_ARGUMENT_KEYS and k not in config_keys]:
        rt.remove(model, key)
        dropped.append(f"model.{key}: a knob of the example's model class, not in this model's config.json")
    parallel = cfg.get("parallel") or {}
    if not has_experts(tree, source):
        for key in ("ep_plan", "expert_fully_shard_parallel_size"):
            if rt.remove(parallel, key) is not None:
                dropped.append(f"parallel.{key}: the model has no experts")
        if parallel.get("expert_parallel_size", 1) != 1:
            parallel["expert_parallel_size"] = 1
            dropped.append("parallel.expert_parallel_size -> 1: the model has no experts")
        loss = (cfg.get("features") or {}).get("loss_cfg") or {}
        if loss.get("router_aux_loss_coef"):
            loss["router_aux_loss_coef"] = 0.0
            dropped.append("features.loss_cfg.router_aux_loss_coef -> 0: no router")
    loss = (cfg.get("features") or {}).get("loss_cfg") or {}
    if tree.get("loss_without_labels") and loss.get("loss_type", "raw") != "raw":
        loss["loss_type"] = "raw"
        dropped.append("features.loss_cfg.loss_type -> raw: the model's forward calls its loss function with "
                       "labels=None and targets of its own, which the engine's loss function cannot line up")
    fsdp = parallel.get("fsdp_plan") or {}
    if fsdp.get("hook_modules"):
        kept = _matching(fsdp["hook_modules"], names) if names else []
        if kept != fsdp["hook_modules"]:
            dropped.append("parallel.fsdp_plan.hook_modules: patterns of the example's modules")
        if kept:
            fsdp["hook_modules"] = kept
        else:
            rt.remove(fsdp, "hook_modules")
    features = cfg.get("features") or {}
    for switch, plan in DRAFT_OFF_FEATURES.items():
        if features.get(switch):
            features[switch] = False
            dropped.append(f"features.{switch} -> false: a memory feature sized for the example")
        if plan and plan in features:
            rt.remove(features, plan)
    return dropped
