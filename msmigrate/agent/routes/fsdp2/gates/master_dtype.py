"""The dtype the target's trainer keeps the master weights in for a delivered config, as its own code decides it
(read in both the stand-in and the real MindSpeed-MM): ``ModelHub`` builds the model on the meta device and casts it
whole to fp32 (``init_model_with_meta_device: true``), or loads it with ``from_pretrained(dtype=float32)``, which
keeps a cast the model's own ``__init__`` makes; the parallel applier then wraps it in FSDP2, whose
``MixedPrecisionPolicy(param_dtype=...)`` is a compute copy (the sharded masters keep their dtype) — except with one
fully-sharded rank and no meta init, where it wraps DDP and casts every parameter (LoRA ones aside) to
``fsdp_plan.param_dtype`` first. G1 says this next to a plugin that casts part of itself (``probes/_dtypes.py``): what
the delivered config means the masters to be, and whether the trainer's build would keep the plugin's cast."""

from __future__ import annotations

from typing import Any

import yaml

from msmigrate.agent.routes.fsdp2.draft_config import load_baseline


def _section(cfg: dict[str, Any] | None, name: str) -> dict[str, Any]:
    value = (cfg or {}).get(name)
    return value if isinstance(value, dict) else {}


def master_weights(delivered: dict[str, Any] | None) -> dict[str, Any]:
    """``{"dtype", "keeps_model_cast", "how"}`` for the delivered config (None: no config to read)."""
    training, parallel = _section(delivered, "training"), _section(delivered, "parallel")
    plan = parallel.get("fsdp_plan") if isinstance(parallel.get("fsdp_plan"), dict) else {}
    param_dtype = plan.get("param_dtype")
    compute = f"; parallel.fsdp_plan.param_dtype {param_dtype} is FSDP2's compute copy" if param_dtype else ""
    if training.get("init_model_with_meta_device"):
        return {"dtype": "float32", "keeps_model_cast": False,
                "how": "training.init_model_with_meta_device: the trainer builds the model on meta and casts it whole "
                       "to float32, which undoes the cast there (a from_pretrained build keeps it)" + compute}
    if str(parallel.get("fully_shard_parallel_size")) == "1" and param_dtype:
        return {"dtype": str(param_dtype), "keeps_model_cast": False,
                "how": f"one fully-sharded rank without meta init: the trainer wraps DDP and casts every parameter to "
                       f"parallel.fsdp_plan.param_dtype {param_dtype}"}
    return {"dtype": "float32", "keeps_model_cast": True,
            "how": "the trainer loads the weights with from_pretrained(dtype=float32), which keeps a cast the model's "
                   "own __init__ makes: those parameters would train with master weights in the plugin's dtype"
                   + compute}


def master_sentence(delivered: dict[str, Any] | None) -> str:
    """What the delivered config's precision says the master weights are, for a G1 dtype problem."""
    if delivered is None:
        return "no delivered config yet: its precision settings are not read"
    m = master_weights(delivered)
    return f"the delivered config keeps the master weights in {m['dtype']} ({m['how']})"


def delivered_and_baseline(ctx: Any, plan: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The run's written YAML (None before the config phase) and, without one, the similar example's config."""
    written = ctx.target / plan["config_path"] if plan.get("config_path") else None
    delivered = yaml.safe_load(written.read_text(encoding="utf-8")) if written and written.is_file() else None
    baseline = load_baseline(ctx.target, plan["similar_case"])[0] \
        if delivered is None and plan.get("similar_case") else None
    return delivered, baseline


def delivered_or_example(ctx: Any, plan: dict[str, Any]) -> dict[str, Any] | None:
    """The run's written YAML, else the similar example's config, else None."""
    delivered, baseline = delivered_and_baseline(ctx, plan)
    return delivered if delivered is not None else baseline
