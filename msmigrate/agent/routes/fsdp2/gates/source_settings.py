"""G3: training settings of the delivered YAML that no gate launch exercises, checked against what the source and
the target state. The gates' own launches set these aside on purpose — input binding loads the spec's source with
``no_load_optim`` / ``no_load_rng`` set (``draft_config.input_overrides``), training parity runs both sides in fp32
— so a wrong value would first show in the user's training launch.

- Optimizer state from a weights folder: ``training.load`` read as Hugging Face weights (a folder of safetensors,
  ``load_format`` auto or hf) holds model weights only — no optimizer state, no RNG state. The delivered YAML must
  say so (``no_load_optim`` and ``no_load_rng`` true), or the trainer asks the folder for state it does not hold.
- Precision: the FSDP mixed-precision ``param_dtype`` fp16 on a source whose weights are bf16 or fp32
  (``config.json``'s ``torch_dtype`` / ``dtype``). fp16 has 5 exponent bits (largest value 65504, smallest normal
  6e-5) where bf16 and fp32 have 8: activations the source computes can overflow and small gradients underflow to 0,
  which training in fp16 survives only with loss scaling. Reported when the target's trainer package (the folder
  holding the launched entry point's package) has no loss scaler (no ``GradScaler`` / ``loss_scale``) — with one,
  fp16 is a supported choice.
- The runtime's default dtype: torch's default dtype as G0's env probe read it in the target runtime
  (``default_dtype``) against the dtypes the delivered YAML trains in (float32, the master weights' dtype, and every
  ``*_dtype`` it names: ``param_dtype``, ``reduce_dtype`` …). A start-up hook of the runtime (a sitecustomize, a
  ``.pth`` file) that sets another, float64 say, builds the model and its buffers in it; both sides of the gates'
  parity checks run in that runtime, so they agree and nothing else sees it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from msmigrate.agent.routes.fsdp2.weights_load import weights_origin

_FP16 = {"fp16", "float16", "half", "torch.float16"}
_WIDE = {"bfloat16", "bf16", "float32", "fp32", "torch.bfloat16", "torch.float32"}
_SCALER = re.compile(r"\bGradScaler\b|\bloss_scale\w*|\bLossScaler\b")


DTYPE_NAMES = {"fp32": "float32", "float32": "float32", "float": "float32", "bf16": "bfloat16",
                "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16", "half": "float16",
                "fp64": "float64", "float64": "float64", "double": "float64"}


def _named_dtypes(node: Any, key: str = "") -> set[str]:
    """The torch dtypes the YAML's ``*_dtype`` keys name, anywhere in it."""
    if isinstance(node, dict):
        return set().union(*(_named_dtypes(v, str(k)) for k, v in node.items())) if node else set()
    if isinstance(node, list):
        return set().union(*(_named_dtypes(v, key) for v in node)) if node else set()
    if key.endswith("dtype") and isinstance(node, str):
        name = DTYPE_NAMES.get(node.lower().removeprefix("torch."))
        return {name} if name else set()
    return set()


def default_dtype_findings(delivered: dict[str, Any], runtime: dict[str, Any] | None,
                           config: str) -> list[dict[str, Any]]:
    """torch's default dtype in the runtime when it is none the delivered YAML trains in (module docstring)."""
    default = (runtime or {}).get("default_dtype")
    trains_in = {"float32", *_named_dtypes(delivered)}
    if not isinstance(default, str) or default in trains_in:
        return []
    return [{"severity": "error", "code": "runtime-default-dtype", "path": config, "value": default,
             "message": f"torch's default dtype in the target runtime is {default} (G0's env probe), while {config} "
                        f"trains in {', '.join(sorted(trains_in))}: a model built from its config and every tensor "
                        f"made without a dtype would be {default} in the user's launch (both sides of the gates' "
                        "parity checks share the runtime, so they agree); something run at the interpreter's "
                        "start-up sets it (a sitecustomize or .pth hook calling torch.set_default_dtype)",
             "suggestion": "remove the torch.set_default_dtype call from the runtime's start-up (sitecustomize / "
                           ".pth), so the default is float32"}]


def _training(cfg: dict[str, Any]) -> dict[str, Any]:
    t = cfg.get("training")
    return t if isinstance(t, dict) else {}


def optimizer_state_findings(delivered: dict[str, Any], bound: dict[str, Any]) -> list[dict[str, Any]]:
    """``bound``: the YAML the gates launch (its ``training.load`` resolved to the folder they read); the flags are
    the delivered YAML's own (binding sets them)."""
    kind, folder = weights_origin(bound)
    if kind != "hf-load":
        return []
    t = _training(delivered)
    out = []
    for key, what in (("no_load_optim", "optimizer state"), ("no_load_rng", "RNG state")):
        if t.get(key) is not True:
            out.append({"severity": "error", "code": "checkpoint-state-absent", "path": f"training.{key}",
                        "value": t.get(key),
                        "message": f"training.{key} is {t.get(key)!r}, but training.load ({folder}) is a folder of "
                                   f"Hugging Face weights: it holds model weights only, no {what} to load",
                        "suggestion": f"set training.{key}: true (a weights folder starts a run; a {what} comes "
                                      "only from the trainer's own checkpoint)"})
    return out


def source_dtype(source: Path) -> str | None:
    """The source weights' dtype as its config.json states it (``torch_dtype``, or ``dtype`` in newer releases)."""
    try:
        cfg = json.loads((Path(source) / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(cfg, dict):
        return None
    value = cfg.get("torch_dtype") or cfg.get("dtype")
    if value is None:
        text = cfg.get("text_config")
        value = (text.get("torch_dtype") or text.get("dtype")) if isinstance(text, dict) else None
    return str(value) if value else None


def trainer_scales_loss(target: Path, entries: list[str]) -> bool | None:
    """Whether the launched entry point's package (its folder's parent: ``pkg/fsdp`` for ``pkg/fsdp/train/x.py``)
    has a loss scaler; None when there is no entry to look from."""
    roots = {(Path(target) / e).parent.parent for e in entries}
    if not roots:
        return None
    for root in roots:
        for py in root.rglob("*.py"):
            try:
                if _SCALER.search(py.read_text(encoding="utf-8", errors="replace")):
                    return True
            except OSError:
                continue
    return False


def precision_findings(delivered: dict[str, Any], source: Path, target: Path,
                       entries: list[str]) -> list[dict[str, Any]]:
    plan = ((delivered.get("parallel") or {}).get("fsdp_plan") or {}) if isinstance(delivered.get("parallel"),
                                                                                      dict) else {}
    value = plan.get("param_dtype") if isinstance(plan, dict) else None
    if str(value).lower() not in _FP16:
        return []
    dtype = source_dtype(source)
    if dtype is None or dtype.lower() not in _WIDE or trainer_scales_loss(target, entries) is not False:
        return []
    return [{"severity": "error", "code": "precision-diverges", "path": "parallel.fsdp_plan.param_dtype",
             "value": value,
             "message": f"parallel.fsdp_plan.param_dtype is {value!r} while the source's weights are {dtype} "
                        "(8 exponent bits; fp16 has 5: values above 65504 overflow, gradients below 6e-5 lose "
                        "precision or vanish) and the target's trainer has no loss scaler (no GradScaler / "
                        "loss_scale in its package): the migrated training computes in a narrower range than the "
                        "source's",
             "suggestion": "set parallel.fsdp_plan.param_dtype to bf16 (the source's range) or fp32"}]

