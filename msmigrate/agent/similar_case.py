"""Rank the target's existing plugin-route examples by how much a new model resembles them (facts only).

Signals, each with a reason string so the ranking is explainable in ``similar_case.md``:
- family: the example's model id / registered class shares the source's model-type stem (``qwen``, ``glm`` …);
- media tokens: the example's template feeds an mm_plugin whose image token the source tokenizer also has;
- build path: the custom path (a BaseModel class) or the transformers path, compared with the registered class's
  bases; remote code (trust_remote_code) whose ``auto_map`` names an AutoModel class takes the transformers path;
- data stack: the example uses the generic ``huggingface`` dataset (the usual landing for a VLM).

Ties (several examples of one family score alike) break by architecture and size: an example of the same kind (dense
vs mixture-of-experts) first, then the one whose stated parameter count is nearest the source's (counted from its
safetensors headers), then the file name; each example's ``tie_break`` says where it stands."""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path
from typing import Any


def _stem(text: str | None) -> str:
    m = re.match(r"[a-z]+", (text or "").lower())
    return m.group(0) if m else ""


def _custom_build(bases: list[str]) -> bool:
    return any("BaseModel" in b or "nn.Module" in b for b in bases) and not any("PreTrained" in b or "For" in b for b in bases)


def remote_code_build_path(auto_map: dict[str, Any]) -> str:
    """The ModelHub path remote code takes: ``transformers`` when ``auto_map`` names an AutoModel class (the vendored
    class loads with from_pretrained), else ``custom`` (a BaseModel plugin must build it)."""
    return "transformers" if any(k.startswith("AutoModel") for k in auto_map or {}) else "custom"


def checkpoint_parameters(folder: Path) -> int | None:
    """The parameter count of a safetensors checkpoint, read off its file headers (no tensor is loaded)."""
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for path in files:
        try:
            with open(path, "rb") as f:
                header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        except (OSError, ValueError, struct.error):
            return None
        total += sum(math.prod(v.get("shape") or [1]) for k, v in header.items() if k != "__metadata__")
    return total


def source_scale(folder: Path, experts: bool) -> dict[str, Any]:
    """The source's architecture kind and size, the facts ties break on."""
    return {"moe": experts, "parameters": checkpoint_parameters(folder)}


def _tie_break(ex: dict[str, Any], scale: dict[str, Any] | None) -> tuple[tuple[int, float], str]:
    """(sort key, reason) of one example against the source's kind and size."""
    if not scale:
        return (0, 0.0), ""
    kind = "MoE" if ex.get("moe") else "dense"
    same = bool(ex.get("moe")) == bool(scale.get("moe"))
    params, size = scale.get("parameters"), ex.get("parameters_b")
    if params and size:
        distance = abs(math.log10(size * 1e9) - math.log10(params))
        how = f"{size:g}B stated in its name vs the source's {params / 1e9:.3g}B"
    else:
        distance = math.inf
        how = "no parameter count stated in its name"
    return (0 if same else 1, distance), f"{kind} example ({'same kind as' if same else 'unlike'} the source); {how}"


def rank_similar_cases(source: dict[str, Any], inventory: dict[str, Any],
                       scale: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    stem = _stem(source.get("model_type"))
    media = set((source.get("tokens") or {}).get("media_tokens") or [])
    # custom code is not the custom build path: remote code with an AutoModel entry loads through transformers
    custom = bool(source.get("needs_trust_remote_code")) and \
        remote_code_build_path(source.get("auto_map") or {}) == "custom"
    models = {m["id"]: m for m in inventory.get("model_ids", [])}
    templates = {t["id"]: t for t in inventory.get("templates", [])}
    ranked = []
    for ex in inventory.get("examples", []):
        if ex.get("parse_error") or ex.get("route") == "bridge":
            continue
        score, why = 0, []
        reg = models.get(ex.get("model_id") or "", {})
        if stem and (stem in (ex.get("model_id") or "").lower() or stem in reg.get("target", "").lower()):
            score += 3
            why.append(f"same family '{stem}'")
        tmpl = templates.get(ex.get("template") or "", {})
        tokens = {tmpl.get("extra", {}).get(k) for k in ("image_token", "video_token")} - {None}
        if tokens & media:
            score += 2
            why.append(f"template {ex.get('template')} uses media token(s) {sorted(tokens & media)}")
        if reg and _custom_build(reg.get("bases", [])) == custom:
            score += 1
            why.append("same build path (" + ("custom BaseModel" if custom else "transformers class") + ")")
        if ex.get("dataset_type") == "huggingface":
            score += 1
            why.append("generic huggingface dataset")
        key, tie = _tie_break(ex, scale)
        ranked.append({"example": ex["file"], "score": score, "why": why or ["no shared signal"], "tie_break": tie,
                       "_key": key,
                       **{k: ex.get(k) for k in ("model_id", "dataset_type", "template", "collator_id", "plugin",
                                                 "apply_modules", "recompute_modules", "loss_type", "scripts")}})
    ranked.sort(key=lambda c: (-c["score"], c["_key"], c["example"]))
    for c in ranked:
        del c["_key"]
    return ranked
