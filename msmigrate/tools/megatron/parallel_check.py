"""Parallelism arithmetic for the Megatron route, checked against the source's HF config.json (no torch).

Megatron splits attention heads over tensor-parallel ranks and layers over pipeline stages (and virtual stages),
so sizes that do not divide the model fail at build time on an accelerator; these checks say so before a launch.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Sub-config keys that hold the language model of a composite config, in the order transformers'
# ``PretrainedConfig.get_text_config`` tries its own (text_config, decoder, generator, text_encoder); the last two
# are the names multimodal repos with their own code use for the LLM part (InternVL, MiniCPM-V …).
TEXT_CONFIG_KEYS = ("text_config", "decoder", "generator", "text_encoder", "llm_config", "language_config")


def text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The language model's part of a config.json: the first sub-config that carries attention heads, else the
    top level (a plain decoder)."""
    for key in TEXT_CONFIG_KEYS:
        sub = cfg.get(key)
        if isinstance(sub, dict) and "num_attention_heads" in sub:
            return sub
    return cfg


@dataclass
class ParallelSizes:
    tp: int = 1
    pp: int = 1
    cp: int = 1
    vpp: int = 1  # virtual pipeline stages per pipeline rank
    world_size: int | None = None  # None: derived as tp*pp*cp*dp when dp is given
    dp: int | None = None
    micro_batch_size: int = 1
    global_batch_size: int | None = None
    grad_accum: int | None = None  # None: derived from global / (micro * dp)


@dataclass
class ParallelCheck:
    ok: bool = False
    problems: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # what the model and the sizes came to (heads, dp, …)
    error: str | None = None  # the config could not be read at all

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def check_parallel(cfg: dict[str, Any], sizes: ParallelSizes) -> ParallelCheck:
    text = text_config(cfg)
    heads = _int(text.get("num_attention_heads"))
    kv = _int(text.get("num_key_value_heads")) or heads  # absent: multi-head attention, one KV head per head
    layers = _int(text.get("num_hidden_layers"))
    if heads is None or layers is None:
        return ParallelCheck(error="config.json has no num_attention_heads / num_hidden_layers in its text config")
    out = ParallelCheck(facts={"num_attention_heads": heads, "num_key_value_heads": kv, "num_hidden_layers": layers})
    p = out.problems
    for name in ("tp", "pp", "cp", "vpp", "micro_batch_size"):
        if getattr(sizes, name) < 1:
            p.append(f"{name} must be at least 1 (is {getattr(sizes, name)})")
    if p:
        return out
    if heads % sizes.tp:
        p.append(f"num_attention_heads {heads} is not divisible by tp {sizes.tp}")
    if kv % sizes.tp:
        p.append(f"num_key_value_heads {kv} is not divisible by tp {sizes.tp} (each TP rank needs whole KV heads)")
    if heads % kv:
        p.append(f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}")
    stages = sizes.pp * sizes.vpp
    if layers % stages:
        p.append(f"num_hidden_layers {layers} is not divisible by pp x vpp = {sizes.pp} x {sizes.vpp} = {stages}")
    if sizes.vpp > 1 and sizes.pp == 1:
        p.append("vpp > 1 needs pp > 1 (virtual stages interleave over pipeline ranks)")
    model_par = sizes.tp * sizes.pp * sizes.cp
    dp = sizes.dp
    if sizes.world_size is not None:
        if sizes.world_size % model_par:
            p.append(f"world size {sizes.world_size} is not divisible by tp x pp x cp = {model_par}")
        elif dp is not None and dp * model_par != sizes.world_size:
            p.append(f"world size {sizes.world_size} != tp x pp x cp x dp = {model_par} x {dp}")
        else:
            dp = sizes.world_size // model_par
    out.facts["dp"] = dp
    if sizes.global_batch_size is not None and dp:
        per_step = sizes.micro_batch_size * dp
        if sizes.grad_accum is not None and per_step * sizes.grad_accum != sizes.global_batch_size:
            p.append(f"global batch {sizes.global_batch_size} != micro x dp x grad-accum = "
                     f"{sizes.micro_batch_size} x {dp} x {sizes.grad_accum}")
        elif sizes.global_batch_size % per_step:
            p.append(f"global batch {sizes.global_batch_size} is not divisible by micro x dp = "
                     f"{sizes.micro_batch_size} x {dp}")
        else:
            out.facts["grad_accum"] = sizes.global_batch_size // per_step
    out.ok = not p
    return out


def check_parallel_for_source(source: Path, sizes: ParallelSizes) -> ParallelCheck:
    try:
        cfg = json.loads((Path(source) / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return ParallelCheck(error=f"cannot read {source}/config.json: {exc}")
    if not isinstance(cfg, dict):
        return ParallelCheck(error="config.json is not a JSON object")
    return check_parallel(cfg, sizes)
