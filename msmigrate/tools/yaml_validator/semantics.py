"""Value-level checks the schema cannot express: values the plugin-route code rejects at run time (contract §6-§8,
§13), device-specific traps, and *weakened* configs (DESIGN decision 2: shrinking a run to get green is a failure)."""

from __future__ import annotations

from typing import Any

from msmigrate.tools.yaml_validator.findings import Finding

LOSS_TYPES = ("raw", "default", "per_sample_loss", "per_token_loss")
DTYPES = ("fp16", "bf16", "fp32", "fp64", "int8", "int16", "int32", "int64")
STAGES = ("sft", "pretrain", "rm")
DEFAULT_ATTN = "flash_attention_2"  # ModelArguments default (contract §3.2)
MIN_TRAIN_ITERS = 5


def get(data: Any, dotted: str, default: Any = None) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return default
        data = data[part]
    return data


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def semantic_checks(data: dict, *, device: str | None = None, min_train_iters: int = MIN_TRAIN_ITERS) -> list[Finding]:
    """``device``: "cpu", "cuda", "npu" or None (unknown: device-specific checks are skipped)."""
    out: list[Finding] = []

    def add(sev: str, code: str, path: str, msg: str, fix: str | None = None) -> None:
        out.append(Finding(sev, code, path, msg, fix))

    loss_type = get(data, "features.loss_cfg.loss_type", "raw")
    if isinstance(loss_type, str) and loss_type not in LOSS_TYPES:
        add("error", "bad-loss-type", "features.loss_cfg.loss_type",
            f"loss_type {loss_type!r} is not implemented by the target (`NotImplementedError: {loss_type} is not "
            "implemented!`)", "use one of " + ", ".join(LOSS_TYPES))
    if get(data, "features.enable_chunk_loss") is True and loss_type in (None, "raw"):
        add("error", "chunk-loss-needs-loss-type", "features.enable_chunk_loss",
            "chunk loss needs the framework loss (`loss_type` other than raw)", "set features.loss_cfg.loss_type: default")

    tp = _num(get(data, "parallel.tensor_parallel_size", 1))
    if tp is not None and tp != 1:
        add("error", "tp-unsupported", "parallel.tensor_parallel_size",
            "tensor parallelism is not implemented on the plugin route (`Tensor parallel size not supported yet.`)",
            "set tensor_parallel_size: 1")
    ring = _num(get(data, "parallel.ring_attention_size", 1))
    if device in ("cpu", "cuda") and ring is not None and ring > 1:
        add("error", "ring-attention-needs-npu", "parallel.ring_attention_size",
            "`Ring Attention only support on NPU.`", "set ring_attention_size: 1 off-NPU")
    attn = get(data, "model.attn_implementation", DEFAULT_ATTN)
    if device in ("cpu", "cuda") and isinstance(attn, str) and attn.startswith("flash"):
        where = "" if get(data, "model.attn_implementation") is not None else " (the default when the key is absent)"
        add("warning", "flash-attn-off-npu", "model.attn_implementation",
            f"attn_implementation {attn!r}{where} needs flash-attn kernels that a {device} target usually lacks "
            "(`FlashAttention2 has been toggled on, but it cannot be used`)", "use sdpa or eager off-NPU")

    for key in ("param_dtype", "reduce_dtype", "output_dtype"):
        value = get(data, f"parallel.fsdp_plan.{key}")
        if value is not None and value not in DTYPES:
            add("error", "bad-dtype", f"parallel.fsdp_plan.{key}", f"`Unsupported dtype: {value}`",
                "use one of " + ", ".join(DTYPES))

    dl = "data.dataloader_param"
    mode = get(data, f"{dl}.dataloader_mode")
    if isinstance(mode, str) and mode not in ("base", "sampler"):
        add("error", "bad-dataloader-value", f"{dl}.dataloader_mode", f"`Unsupported dataloader_mode: {mode}`",
            "use sampler (or base)")
    if mode == "sampler":
        sampler = get(data, f"{dl}.sampler_type")
        if isinstance(sampler, str) and sampler != "BaseRandomBatchSampler":
            add("error", "bad-dataloader-value", f"{dl}.sampler_type",
                f"`Sampler type {sampler} is not implemented.`", "use BaseRandomBatchSampler")
        if get(data, f"{dl}.drop_last") is False:
            add("error", "bad-dataloader-value", f"{dl}.drop_last",
                "`It is not implemented that the drop_last is false.`", "set drop_last: true")
    stage = get(data, "data.dataset_param.basic_parameters.stage")
    if stage is not None and stage not in STAGES:
        add("error", "bad-value", "data.dataset_param.basic_parameters.stage", f"`not support stage: {stage}`",
            "use sft, pretrain or rm")

    lr = _num(get(data, "training.lr", 5e-5))
    for bound in ("lr_min", "lr_start"):
        low = _num(get(data, f"training.{bound}", 0.0))
        if lr is not None and low is not None and lr < low:
            add("error", "bad-value", f"training.{bound}", f"training.lr ({lr}) must be >= training.{bound} ({low})")

    # ---- weakened configs: each would make a run "pass" without proving the migration
    iters = _num(get(data, "training.train_iters", 10000))
    if iters is not None and iters < min_train_iters:
        add("error", "weakened-train-iters", "training.train_iters",
            f"train_iters={int(iters)} is too few steps to show a loss trend (minimum {min_train_iters})",
            f"use at least {min_train_iters} iterations")
    if _num(get(data, "parallel.fully_shard_parallel_size", "auto")) == 1:
        add("error", "weakened-no-fsdp", "parallel.fully_shard_parallel_size",
            "fully_shard_parallel_size=1 turns FSDP sharding off (DDP fallback); the migration must run sharded",
            "use fully_shard_parallel_size: auto")
    if lr == 0:
        add("error", "weakened-zero-lr", "training.lr", "lr=0 makes training a no-op", "restore the baseline lr")
    freeze = get(data, "model.freeze") or []
    if isinstance(freeze, list) and any(p in ("*", "") for p in freeze if isinstance(p, str)):
        add("error", "weakened-all-frozen", "model.freeze", "a freeze pattern selects the whole model",
            "freeze only sub-modules (e.g. model.visual)")
    return out
