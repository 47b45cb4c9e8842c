"""Rank the target's existing plugin-route examples by how much a new model resembles them (facts only).

Signals, each with a reason string so the ranking is explainable in ``similar_case.md``:
- family: the example's model id / registered class shares the source's model-type stem (``qwen``, ``glm`` …);
- media tokens: the example's template feeds an mm_plugin whose image token the source tokenizer also has;
- build path: the custom path (a BaseModel class) or the transformers path, compared with the registered class's
  bases; remote code (trust_remote_code) whose ``auto_map`` names an AutoModel class takes the transformers path;
- data stack: the example uses the generic ``huggingface`` dataset (the usual landing for a VLM)."""

from __future__ import annotations

import re
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


def rank_similar_cases(source: dict[str, Any], inventory: dict[str, Any]) -> list[dict[str, Any]]:
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
        ranked.append({"example": ex["file"], "score": score, "why": why or ["no shared signal"],
                       **{k: ex.get(k) for k in ("model_id", "dataset_type", "template", "collator_id", "plugin",
                                                 "apply_modules", "recompute_modules", "loss_type", "scripts")}})
    ranked.sort(key=lambda c: (-c["score"], c["example"]))
    return ranked
