"""Derive ``apply_modules`` / ``recompute_plan`` patterns from the REAL module tree of the built model
(the maintainers' rule: patterns come from printed ``named_modules()``, never from memory).

Shape of the result follows the framework's examples: each repeated block list as ``<list>.{*}``, the sub-model
that owns each list, the token embedding, the LM head — so every block is its own FSDP unit and the sub-models
and root gather the rest."""

from __future__ import annotations

import re
from typing import Any

_INDEXED = re.compile(r"^(?P<list>.+)\.(?P<idx>\d+)$")
_BLOCKISH = re.compile(r"(Layer|Block)$")


def block_lists(tree: dict[str, Any]) -> list[tuple[str, str]]:
    """(list path, block class) for every indexed child whose class is a no-split block, or — when the model
    declares none — a ModuleList child whose class name ends with Layer/Block."""
    classes: dict[str, str] = tree.get("classes", {})
    no_split = set(tree.get("no_split_modules") or [])
    seen: dict[str, str] = {}
    for name in tree.get("names", []):
        m = _INDEXED.match(name)
        if not m:
            continue
        cls, parent = classes.get(name, ""), m.group("list")
        is_block = cls in no_split if no_split else (
            classes.get(parent) == "ModuleList" and bool(_BLOCKISH.search(cls)))
        if is_block and parent not in seen and not _INDEXED.match(parent):
            seen[parent] = cls
    return sorted(seen.items(), key=lambda kv: tree["names"].index(kv[0]) if kv[0] in tree["names"] else 0)


def _owner(list_path: str, names: set[str]) -> str | None:
    """The sub-model holding a block list: ``model.visual.blocks`` → ``model.visual``; none for root-level lists
    such as ``model.layers`` (the root is wrapped anyway)."""
    parts = list_path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        cand = ".".join(parts[:cut])
        if cand in names and cand != "model":
            return cand
    return None


def apply_modules_from_tree(tree: dict[str, Any]) -> list[str]:
    """``tree["tied_embeddings"]`` (from the model config): the LM head shares its weight with the token embedding,
    and FSDP2 refuses a parameter managed by two groups — so neither the head, the embedding, nor the sub-model
    holding the embedding gets its own unit; the root unit owns the shared weight. ``tree["capture_lost"]``: sub-models
    that fully_shard would leave without their hook-based output capture get no unit of their own either."""
    names = set(tree.get("names", []))
    classes = tree.get("classes", {})
    tied = bool(tree.get("tied_embeddings"))
    embeds = [n for n in tree.get("names", []) if n.endswith("embed_tokens")]
    patterns: list[str] = []
    for list_path, _cls in block_lists(tree):
        patterns.append(f"{list_path}.{{*}}")
        owner = _owner(list_path, names)
        if tied and owner and any(e.startswith(owner + ".") for e in embeds):
            continue
        if owner and owner not in patterns:
            patterns.append(owner)
    no_split = set(tree.get("no_split_modules") or [])
    for name in tree.get("names", []):
        # a no-split class that is not part of an indexed list (e.g. CLIP's vision embeddings) is its own unit
        if name and classes.get(name) in no_split and not _INDEXED.match(name) and name not in patterns:
            patterns.append(name)
    if not tied:
        for name in embeds:
            if classes.get(name) == "Embedding" and name not in patterns:
                patterns.append(name)
        if "lm_head" in names:
            patterns.append("lm_head")
    # Keep the framework's conventional order: vision first, then embeddings, layers, language model, head.
    def rank(p: str) -> tuple[int, int]:
        vision = any(k in p for k in ("visual", "vision", "mm_projector", "multi_modal_projector"))
        group = 0 if vision else 1 if p.endswith("embed_tokens") else 3 if p == "lm_head" else 2
        return (group, patterns.index(p))

    # a sub-model whose hook-based output capture a class swap loses (``tree["capture_lost"]``) is no unit of its own:
    # fully_shard would make its hidden_states None for the parent reading them; its blocks still are units
    lost = set(tree.get("capture_lost") or []) | splits_a_tie(tree, patterns)
    return sorted(dict.fromkeys(p for p in patterns if p not in lost), key=rank)


def splits_a_tie(tree: dict[str, Any], patterns: list[str]) -> set[str]:
    """The patterns whose units hold some but not all names of one tied parameter (``tree["tied_parameters"]``: the
    built model's groups of names that are one Parameter, any pair, not only the embedding one). FSDP2 gives a
    parameter to the innermost unit around its holder; a unit holding one name of a group leaves the others to an
    outer unit, and one Parameter in two units is refused ("shared with a parameter already managed by another FSDP
    group"). Without those units, the innermost unit around the whole group (or the root's) owns it."""
    names = [n for n in tree.get("names", []) if n]
    groups = tree.get("tied_parameters") or []
    return {p for p in patterns if holds_part_of_a_tie([n for n in names if _pattern_regex(p).match(n)], groups)}


def holds_part_of_a_tie(units: list[str], groups: list[list[str]]) -> bool:
    """Whether the modules ``units`` hold some but not all parameter names of one tied group."""
    for group in groups:
        held = [any(p.startswith(u + ".") for u in units) for p in group]
        if any(held) and not all(held):
            return True
    return False


def recompute_from_tree(tree: dict[str, Any]) -> list[str]:
    """Block lists whose block forward accepts ``past_key_values`` (or ``**kwargs``) — the recompute wrapper
    always passes ``past_key_values=None``."""
    accepts = tree.get("accepts_past_key_values", {})
    return [f"{path}.{{*}}" for path, cls in block_lists(tree) if accepts.get(cls, False)]


def recompute_blocked(tree: dict[str, Any]) -> list[dict[str, str]]:
    """Block lists recompute leaves out, each with why: their block forward takes neither ``past_key_values`` nor
    ``**kwargs``, which the recompute wrapper passes (held-out remote code with its own decoder layer
    ``forward(x, cos, sin, mask)``: the empty suggestion read as "nothing to recompute")."""
    accepts = tree.get("accepts_past_key_values", {})
    renamed = tree.get("past_key_values_renamed") or {}

    def why(cls: str) -> str:
        if cls in renamed:
            return (f"{cls}.forward takes past_key_values as {renamed[cls]!r} (a renaming decorator) and its caller "
                    f"passes {renamed[cls]!r} by position: the recompute wrapper's past_key_values=None would give it "
                    "twice (forward() got multiple values)")
        return (f"{cls}.forward takes neither past_key_values nor **kwargs (the recompute wrapper passes "
                "past_key_values=None): to recompute these, give that forward **kwargs (a subclass in the "
                "plugin, or the vendored remote code)")

    return [{"path": f"{path}.{{*}}", "block_class": cls, "why": why(cls)}
            for path, cls in block_lists(tree) if cls in accepts and not accepts[cls]]


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    return re.compile("^" + re.escape(pattern).replace(re.escape("{*}"), r"\d+") + "$")


def root_unit_modules(tree: dict[str, Any], patterns: list[str], limit: int = 20) -> list[str]:
    """The largest subtrees no pattern wraps: the framework shards the listed modules first and then the whole model,
    so these (a projector, a tied LM head, norms, rotary tables) belong to the root's unit. Shown beside the
    suggestion so a module missing from it reads as a choice with a reason, not an omission."""
    names = [n for n in tree.get("names", []) if n]
    regexes = [_pattern_regex(p) for p in patterns]
    units = {n for n in names if any(r.match(n) for r in regexes)}

    def covered(n: str) -> bool:
        return any(n == u or n.startswith(u + ".") for u in units)

    def unit_below(n: str) -> bool:
        return any(u.startswith(n + ".") for u in units)

    out = []
    for n in names:
        parent = n.rsplit(".", 1)[0] if "." in n else ""
        if covered(n) or unit_below(n):
            continue
        if parent == "" or (not covered(parent) and unit_below(parent)):
            out.append(n)
    return out[:limit]
