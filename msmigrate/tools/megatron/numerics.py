"""The numerics a model JSON section fixes for a tower (activation, norm type, gated MLP, linear biases), read
from the source's own evidence: its config.json sub-config (``hidden_act``) and its weights' names and shapes
(safetensors headers, no tensor read).

Why: a model JSON copied from a neighbouring family's example carries that family's numerics silently (a Qwen2.5-VL
ViT is RMSNorm + silu + a gated MLP; a Qwen2-VL ViT is LayerNorm + quick_gelu + fc1/fc2 with biases). Sizes are
checked elsewhere; these fields change what the layers compute without changing any shape the converter sees.

From the weights, one transformer block (the first repeated one of the tower) is read:
- norm type: its norms (modules holding only 1-D tensors) all carry a bias -> LayerNorm; none does -> RMSNorm;
- gated MLP: its MLP has three matrices, or a matrix named for a gate (a fused gate+up) -> gated; two -> not;
- add_qkv_bias: the q/k/v projections carry biases; add_bias_linear: the other matrices (attention output, MLP) do.
A fact the block shows ambiguously (mixed biases, an MoE's many matrices) is left out, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

VISION_WORDS = ("vision", "visual")
# the first block of a stack of repeated blocks: "<stack>.0.<rest>"
_FIRST_BLOCK = re.compile(r"^(?P<stack>.+?)\.0\.(?P<rest>.+)$")
_QKV = re.compile(r"(^|[._])(q|k|v|qkv|query|key|value|query_key_value|in_proj|linear_qkv|wqkv)(_proj)?$")
_MLP = re.compile(r"(^|\.)(mlp|ffn|feed_forward|fc\d|linear_fc\d)(\.|$)")
# JSON field -> where its value comes from, for the error text
FIELDS = ("activation_func", "normalization", "gated_linear_unit", "add_qkv_bias", "add_bias_linear")


@dataclass
class Numeric:
    value: Any
    evidence: str  # where the source shows it


def _tower(shapes: dict[str, list[int]], role: str) -> dict[str, list[int]]:
    vision = role == "vision_encoder"
    return {n: s for n, s in shapes.items() if any(w in n for w in VISION_WORDS) == vision}


def first_block(shapes: dict[str, list[int]]) -> tuple[str, dict[str, dict[str, list[int]]]] | None:
    """(stack name, module -> leaf -> shape) of the first block of the stack holding the most tensors."""
    stacks: dict[str, dict[str, dict[str, list[int]]]] = {}
    for name, shape in shapes.items():
        m = _FIRST_BLOCK.match(name)
        if not m:
            continue
        mod, _, leaf = m.group("rest").rpartition(".")
        stacks.setdefault(m.group("stack"), {}).setdefault(mod, {})[leaf] = shape
    if not stacks:
        return None
    stack = max(stacks, key=lambda k: sum(len(v) for v in stacks[k].values()))
    return stack, stacks[stack]


def _all_or_none(flags: list[bool]) -> bool | None:
    return (all(flags) if all(flags) or not any(flags) else None) if flags else None


def weight_numerics(shapes: dict[str, list[int]], role: str) -> dict[str, Numeric]:
    """The norm type, gated MLP and linear biases the source tower's first block shows."""
    block = first_block(_tower(shapes, role))
    if block is None:
        return {}
    stack, mods = block
    out: dict[str, Numeric] = {}
    norms = {m: t for m, t in mods.items() if "weight" in t and all(len(s) == 1 for s in t.values())}
    has_bias = _all_or_none(["bias" in t for t in norms.values()])
    if has_bias is not None:
        out["normalization"] = Numeric("LayerNorm" if has_bias else "RMSNorm",
                                       f"{stack}.0 norms {sorted(norms)} {'with' if has_bias else 'without'} a bias")
    linears = {m: t for m, t in mods.items() if len(t.get("weight", [])) == 2}
    qkv = {m: t for m, t in linears.items() if _QKV.search(m.rpartition(".")[2])}
    mlp = {m: t for m, t in linears.items() if m not in qkv and _MLP.search(m)}
    if 2 <= len(mlp) <= 3:
        gated = len(mlp) == 3 or any("gate" in m.rpartition(".")[2] for m in mlp)
        out["gated_linear_unit"] = Numeric(gated, f"{stack}.0 MLP matrices {sorted(mlp)}")
    qkv_bias = _all_or_none(["bias" in t for t in qkv.values()])
    if qkv_bias is not None:
        out["add_qkv_bias"] = Numeric(qkv_bias, f"{stack}.0 {sorted(qkv)} {'with' if qkv_bias else 'without'} "
                                                "a bias")
    rest = {m: t for m, t in linears.items() if m not in qkv}
    bias = _all_or_none(["bias" in t for t in rest.values()]) if 2 <= len(rest) <= 4 else None
    if bias is not None:
        out["add_bias_linear"] = Numeric(bias, f"{stack}.0 {sorted(rest)} {'with' if bias else 'without'} a bias")
    return out


def source_numerics(sub_config: dict[str, Any], shapes: dict[str, list[int]], role: str) -> dict[str, Numeric]:
    """Every numeric fact the source shows for one tower (``role``: vision_encoder or text_decoder)."""
    out = weight_numerics(shapes, role)
    act = next((sub_config[k] for k in ("hidden_act", "hidden_activation") if isinstance(sub_config.get(k), str)),
               None)
    if act:
        out["activation_func"] = Numeric(act, "config.json hidden_act")
    return out


def numerics_diff(section: dict[str, Any], facts: dict[str, Numeric]) -> list[dict[str, Any]]:
    """``{field, have, source, evidence}`` for each numerics field the section has whose value is not the source's
    (fields it lacks: the component takes its default, which the example pairs show is that component's own)."""
    return [{"field": key, "have": section[key], "source": facts[key].value, "evidence": facts[key].evidence}
            for key in FIELDS if key in facts and key in section and section[key] != facts[key].value]


def numerics_problems(name: str, section: dict[str, Any], facts: dict[str, Numeric]) -> list[str]:
    """One problem per field the section has whose value differs from the source's."""
    return [f"{name}.{d['field']} is {d['have']!r}, the source has {d['source']!r} ({d['evidence']}): the "
            "numerics must follow the source, not the example" for d in numerics_diff(section, facts)]
