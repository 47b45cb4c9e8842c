"""Shrink a family's default config to a CPU-tiny one by field structure, never by family.

Each (sub-)config is walked once. What a field is comes from its name's shape and its value's type: a count of
layers (``*_layers`` / ``depth`` ints), of heads (``*heads``), a width (``hidden_size``, ``*_dim`` …), a vocabulary
size, a mixture-of-experts count, or an index into the layers (``*layer`` / ``*layer_indexes`` …). Every width
becomes one value (feed-forward widths another), so widths a family's code requires equal stay equal even where the
family's default sub-configs disagree. Rotary sections that split the old head dimension are
rescaled to the new one. With ``images=True`` a tower's fixed input size (``image_size`` next to a ``patch_size``) becomes
``PATCHES_PER_SIDE`` patches a side; the builder then fits the image processor to it, and falls back to the
family's own image sizes where the shrunk ones break an agreement it cannot see (a fixed token count per image).
A heterogeneous config (transformers' ``per_layer_config``) is shrunk globally with its overrides set aside, and each
kept layer's overrides are shrunk on that layer's own config and moved to the shrunk layer that stands for it.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from typing import Any

from transformers import PretrainedConfig

LAYERS = 2
HEADS = 2
EXPERTS = 4
PATCHES_PER_SIDE = 8  # divisible by every merge / pixel-shuffle / pooling factor seen (2, 4, 8)
HIDDEN, FFN = 256, 512  # 2 heads of 128: the head dim most families' rotary code and defaults assume

_LAYER_COUNT = re.compile(r"^(num_hidden_layers|num_layers|n_layers?|depth|\w+_layers|num_\w+_layers)$")
_HEAD_COUNT = re.compile(r"^(\w*_)?(heads|n_head|num_heads)$|^num_\w*heads$")
_KV_HEADS = re.compile(r"key_value_heads|kv_heads")
_WIDTH = re.compile(r"^(\w+_)?(hidden_size|hidden_dim|d_model|embed_dim|n_embd|projection_dim|intermediate_size"
                    r"|ffn_dim|mlp_dim|ffn_hidden_size|output_dim|out_hidden_size|proj_dims?|out_dim|in_dim|input_size"
                    r"|embedding_dim|moe_intermediate_size|\w*_intermediate_size)$")
_HEAD_DIM = re.compile(r"^(\w+_)?head_dim$")
_EXPERT_COUNT = re.compile(r"^(num_experts|n_routed_experts|num_local_experts|moe_num_experts|num_\w*experts)$")
_EXPERTS_PER_TOKEN = re.compile(r"^(num_experts_per_tok|top_k|moe_topk|num_experts_per_token|moe_k)$")
_SHARED_EXPERTS = re.compile(r"shared_experts$")
_GROUPS = re.compile(r"^(n_group|topk_group)$")
_LAYER_INDEX = re.compile(r"(layer|layers|indexes|indices|index|_ids)$")
# a vocabulary size; a per-layer input embedding table (``vocab_size_per_layer_input``) is indexed by token id too
_VOCAB = re.compile(r"^(\w+_)?vocab_size(_per_layer_input)?$")
# a count of media tokens per image (``mm_tokens_per_image``, ``image_seq_length``, ``num_image_tokens``): a square
# of the tower's patches a side divided by its merge factor, so it follows the tower's shrink
IMAGE_TOKENS = re.compile(r"^(\w*tokens_per_image|image_seq_length|num_image_tokens)$")
_SKIP = {"torch_dtype", "dtype", "architectures", "auto_map", "transformers_version", "id2label", "label2id"}


@dataclass
class ShrinkReport:
    """What was changed, field path -> (old, new): the builder prints it and tests read it."""

    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    widths: dict[int, int] = field(default_factory=dict)
    old_patches_per_side: float | None = None  # the shrunk tower's, before (PATCHES_PER_SIDE after)

    def note(self, path: str, old: Any, new: Any) -> None:
        if old != new:
            self.changes[path] = (old, new)


def shrink_width(key: str, value: int, widths: dict[int, int]) -> int:
    """The tiny width of field ``key``: every model width becomes HIDDEN and every feed-forward width FFN.

    One value for all widths, not a scaled one per value: a family's default sub-configs need not agree with each
    other (a vision tower's output width defaulting to one LM size, the text config to another), and any two widths
    a family's code requires equal are equal in every real checkpoint, so they must be equal in the tiny one."""
    tiny = FFN if any(w in key for w in ("intermediate", "ffn", "mlp")) else HIDDEN
    if value <= tiny:
        return value
    widths[value] = tiny
    return tiny


def _sub_configs(cfg: PretrainedConfig) -> list[tuple[str, PretrainedConfig]]:
    return [(k, v) for k, v in vars(cfg).items() if isinstance(v, PretrainedConfig)]


def _layer_count(cfg: PretrainedConfig) -> int | None:
    for key in ("num_hidden_layers", "num_layers", "depth", "n_layer", "n_layers", "encoder_layers"):
        value = getattr(cfg, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _head_dim(cfg: PretrainedConfig) -> int | None:
    explicit = getattr(cfg, "head_dim", None)
    if isinstance(explicit, int) and explicit > 0:
        return explicit
    hidden, heads = getattr(cfg, "hidden_size", None), getattr(cfg, "num_attention_heads", None)
    if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 and hidden % heads == 0:
        return hidden // heads
    return None


def _is_layer_index(key: str, value: Any) -> bool:
    """A field that points at layers: an int named ``*layer`` / ``*layer_index``, or a list of ints named
    ``*layers`` / ``*indexes`` / ``*indices`` (``vision_feature_layers``, ``deepstack_visual_indexes`` …)."""
    if "token" in key or not _LAYER_INDEX.search(key):
        return False
    if isinstance(value, int) and not isinstance(value, bool):
        return "layer" in key
    return isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value)


def _per_layer_prefix(values: list, n: int) -> list:
    """The first ``n`` entries of a per-layer list, with every distinct string kind it holds kept where ``n``
    allows: a hybrid stack (linear-attention layers with a full-attention one every fourth) keeps both kinds, as
    the family's code may need one of each (a cache that asks its attention layers for mask sizes)."""
    head = list(values[:n])
    kinds = list(dict.fromkeys(v for v in values if isinstance(v, str)))
    missing = [k for k in kinds if k not in head]
    if not missing or len(kinds) > n:
        return head
    for kind in missing:  # into the last place whose kind the head holds twice (never one it holds once)
        place = max(i for i, v in enumerate(head) if head.count(v) > 1)
        head[place] = kind
    return head


def _kinds_per_layer(cfg: PretrainedConfig, old_layers: int | None) -> int:
    """The most distinct string kinds a per-layer list of ``cfg`` holds (``layer_types``: conv, full and sliding
    attention …): the shrunk stack keeps that many layers, so each kind of layer is built and checked."""
    if not old_layers:
        return 0
    return max((len({v for v in value if isinstance(v, str)}) for key, value in vars(cfg).items()
                if not key.startswith("_") and isinstance(value, list) and len(value) == old_layers), default=0)


def _remap_index(idx: int, old_n: int, new_n: int) -> int:
    """A layer index into ``old_n`` layers, moved to the same relative depth of ``new_n`` (negatives count from
    the end and stay negative, within the new range)."""
    if idx < 0:
        return max(idx, -new_n)
    if old_n <= 1:
        return 0
    return min(new_n - 1, round(idx * (new_n - 1) / (old_n - 1)))


def _shrink_index_value(value: Any, old_n: int, new_n: int) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return _remap_index(value, old_n, new_n)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and not isinstance(v, bool)
                                                          for v in value):
        mapped = list(dict.fromkeys(_remap_index(v, old_n, new_n) for v in value))
        return type(value)(mapped)
    return value


def _rescale_sections(rope: dict, old_half: int, new_half: int) -> dict:
    """Rotary ``*section*`` lists that split the old head dim's rotary half are rescaled to split the new half."""
    out = dict(rope)
    for key, value in rope.items():
        if "section" in key and isinstance(value, list) and value and all(isinstance(v, int) for v in value) \
                and sum(value) == old_half and old_half != new_half:
            scaled = [max(1, v * new_half // old_half) for v in value]
            scaled[-1] += new_half - sum(scaled)
            out[key] = scaled
    return out


def _shrink_image_size(cfg: PretrainedConfig, path: str, report: ShrinkReport) -> float | None:
    """Set the tower's input size to PATCHES_PER_SIDE patches a side; returns new / old patches a side (None when
    nothing changed). A tower of fewer patches a side grows to it too: its count need not divide by the family's
    merge / pixel-shuffle factor (7 patches of 32 at 224 pixels, a factor of 2), where PATCHES_PER_SIDE does."""
    patch, size = getattr(cfg, "patch_size", None), getattr(cfg, "image_size", None)
    if isinstance(patch, (list, tuple)) and len(patch) == 2 and patch[0] == patch[1]:
        patch = patch[0]  # a square patch given as (h, w)
    if not isinstance(patch, int) or isinstance(patch, bool) or patch <= 0:
        return None
    tiny = patch * PATCHES_PER_SIDE
    if isinstance(size, int) and not isinstance(size, bool) and size > 0 and size != tiny:
        cfg.image_size = tiny
        report.note(f"{path}image_size", size, tiny)
        return tiny / size
    if isinstance(size, (list, tuple)) and len(size) == 2 and all(isinstance(v, int) and v > 0 for v in size) \
            and (size[0] == size[1] or min(size) > tiny) and list(size) != [tiny, tiny]:
        cfg.image_size = type(size)([tiny, tiny])
        report.note(f"{path}image_size", size, cfg.image_size)
        return tiny / size[0]
    return None


def shrunk_token_count(value: int, old_patches_per_side: float) -> int | None:
    """A square media-token count per image of a tower with ``old_patches_per_side`` patches a side, for the same
    tower at PATCHES_PER_SIDE: the patches a side over the tokens a side is the merge / pooling factor; kept."""
    side = math.isqrt(value)
    if side * side != value or side == 0:
        return None
    factor = max(1, round(old_patches_per_side / side))
    return (PATCHES_PER_SIDE // factor) ** 2 if PATCHES_PER_SIDE % factor == 0 else None


def _shrink_image_tokens(seen: list[tuple[str, PretrainedConfig]], ratio: float, report: ShrinkReport) -> None:
    """Media-token counts per image that are a square follow the tower (``shrunk_token_count``)."""
    report.old_patches_per_side = PATCHES_PER_SIDE / ratio
    for path, node in seen:
        for key, value in list(vars(node).items()):
            if not IMAGE_TOKENS.match(key) or "audio" in key or not isinstance(value, int) \
                    or isinstance(value, bool) or value <= 0:
                continue
            new = shrunk_token_count(value, report.old_patches_per_side)
            if new is not None:
                setattr(node, key, new)
                report.note(f"{path}{key}", value, new)


def _shrink_one(cfg: PretrainedConfig, path: str, report: ShrinkReport, vocab: int, max_layers: int) -> None:
    old_layers = _layer_count(cfg)
    old_head_dim = _head_dim(cfg)
    old_heads = getattr(cfg, "num_attention_heads", None)
    old_hidden = getattr(cfg, "hidden_size", None)
    items = [(k, v) for k, v in vars(cfg).items() if not k.startswith("_") and k not in _SKIP
             and not isinstance(v, PretrainedConfig)]
    new_layers = min(old_layers, max(LAYERS, _kinds_per_layer(cfg, old_layers))) if old_layers else LAYERS
    for key, value in items:
        new = value
        is_int = isinstance(value, int) and not isinstance(value, bool)
        if is_int and _LAYER_COUNT.match(key) and value > 0:
            new = new_layers if value == old_layers else min(value, LAYERS)
        elif is_int and _KV_HEADS.search(key) and value > 0:
            new = HEADS if isinstance(old_heads, int) and value == old_heads else 1
        elif is_int and _HEAD_COUNT.match(key) and value > 0:
            new = min(value, HEADS)
        elif isinstance(value, list) and _HEAD_COUNT.match(key) and all(isinstance(v, int) for v in value):
            new = [min(v, HEADS) for v in value][:max(1, min(len(value), LAYERS))]
        elif is_int and _WIDTH.match(key) and value > 0:
            new = shrink_width(key, value, report.widths)
        elif isinstance(value, list) and _WIDTH.match(key) and value and all(isinstance(v, int) for v in value):
            new = [shrink_width(key, v, report.widths) for v in value]
        elif is_int and _VOCAB.match(key) and value > vocab:
            new = vocab
        elif is_int and _EXPERT_COUNT.match(key) and value > EXPERTS:
            new = EXPERTS
        elif is_int and _EXPERTS_PER_TOKEN.match(key) and value > 2:
            new = 2
        elif is_int and _SHARED_EXPERTS.search(key) and value > 1:
            new = 1
        elif is_int and _GROUPS.match(key) and value > 1:
            new = 1
        elif key in ("depths",) and isinstance(value, list):
            new = [min(v, 1) for v in value]
        elif _is_layer_index(key, value) and (old_layers or max_layers) \
                and not (isinstance(value, list) and len(value) == old_layers):
            new = _shrink_index_value(value, old_layers or max_layers, new_layers)
        elif isinstance(value, list) and old_layers and len(value) == old_layers and old_layers > new_layers:
            new = _per_layer_prefix(value, new_layers)  # one entry per layer (layer_types, per-layer sizes …)
        if new is not value:
            setattr(cfg, key, new)
            report.note(f"{path}{key}", value, new)
    # an explicit head_dim that merely stored hidden / heads follows the new hidden / heads
    explicit, heads, hidden = getattr(cfg, "head_dim", None), getattr(cfg, "num_attention_heads", None), \
        getattr(cfg, "hidden_size", None)
    if isinstance(explicit, int) and isinstance(old_hidden, int) and isinstance(old_heads, int) and old_heads \
            and explicit * old_heads == old_hidden and isinstance(heads, int) and heads and isinstance(hidden, int):
        cfg.head_dim = hidden // heads
        report.note(f"{path}head_dim", explicit, cfg.head_dim)
    # rotary sections follow the head dim (explicit or hidden / heads) the shrink produced
    new_head_dim = _head_dim(cfg)
    for key in ("rope_parameters", "rope_scaling"):
        rope = getattr(cfg, key, None)
        if isinstance(rope, dict) and old_head_dim and new_head_dim:
            factor = rope.get("partial_rotary_factor", getattr(cfg, "partial_rotary_factor", 1.0)) or 1.0
            old_half, new_half = int(old_head_dim * factor) // 2, int(new_head_dim * factor) // 2
            scaled = _rescale_sections(rope, old_half, new_half)
            if scaled != rope:
                setattr(cfg, key, scaled)
                report.note(f"{path}{key}", rope, scaled)


def _layer_sources(old: dict[str, list], new: dict[str, list], n: int) -> list[int]:
    """For each of the ``n`` shrunk layers, the old layer it stands for: itself where every per-layer list (old
    and shrunk values by field) kept its entry, else the first old layer whose entries match its shrunk ones."""
    sources = []
    for i in range(n):
        if all(new[k][i] == old[k][i] for k in new):
            sources.append(i)
            continue
        match = next((j for j in range(len(next(iter(old.values())))) if all(new[k][i] == old[k][j] for k in new)),
                     i)
        sources.append(match)
    return sources


def _shrink_heterogeneous(cfg: PretrainedConfig, path: str, report: ShrinkReport, vocab: int,
                          max_layers: int) -> bool:
    """A config with per-layer overrides (transformers' ``per_layer_config``: a full-attention layer's wider head,
    a layer's own head or expert count) reads those fields per layer, never globally. Its global fields shrink as
    any config's; each override is the field shrunk on that layer's own config (the global one with the layer's
    overrides, by the same rules), and moves to the shrunk layer standing for its old layer (the one whose
    per-layer kinds it has). Returns False for a config without overrides."""
    spec = vars(cfg).get("_heterogeneity_spec")
    if spec is None:
        return False
    overrides = {i: dict(o) for i, o in spec.per_layer_overrides.items()}
    old_layers = _layer_count(cfg)
    lists = {k: list(v) for k, v in vars(cfg).items() if not k.startswith("_") and isinstance(v, list)
             and old_layers and len(v) == old_layers}
    layer_cfgs = {}
    for i, layer in overrides.items():  # each overriding layer's full config, before the global shrink
        layer_cfg = copy.copy(cfg)
        layer_cfg.per_layer_config = None
        for key, value in layer.items():
            if key != "skip":
                setattr(layer_cfg, key, value)
        layer_cfgs[i] = layer_cfg
    cfg.per_layer_config = None
    _shrink_one(cfg, path, report, vocab, max_layers)
    new_layers = _layer_count(cfg) or 0
    shrunk = {k: v for k, v in ((k, getattr(cfg, k, None)) for k in lists) if isinstance(v, list)
              and len(v) == new_layers}
    sources = _layer_sources({k: lists[k] for k in shrunk}, shrunk, new_layers)
    for old_i in set(sources) & set(overrides):  # each kept layer's own config, shrunk by the same rules
        _shrink_one(layer_cfgs[old_i], path, ShrinkReport(), vocab, max_layers)
    per_layer = {new_i: {k: v if k == "skip" else getattr(layer_cfgs[old_i], k) for k, v in overrides[old_i].items()}
                 for new_i, old_i in enumerate(sources) if old_i in overrides}
    cfg.per_layer_config = per_layer
    report.note(f"{path}per_layer_config", overrides, per_layer)
    return True


def shrink_config(cfg: PretrainedConfig, vocab: int, images: bool = False) -> ShrinkReport:
    """Shrink ``cfg`` and every sub-config in place; ``vocab`` is the tiny tokenizer's (padded) size; ``images``
    also shrinks the towers' fixed input sizes."""
    report = ShrinkReport()
    tree = [("", cfg)]
    seen: list[tuple[str, PretrainedConfig]] = []
    while tree:
        path, node = tree.pop(0)
        seen.append((path, node))
        tree.extend((f"{path}{k}.", v) for k, v in _sub_configs(node))
    # the top level's layer-index fields (vision_feature_layer …) index a tower below it: take the deepest one
    max_layers = max((_layer_count(c) or 0) for _, c in seen)
    # text configs first, so the LM's hidden size fixes the tiny value every equal width maps to
    seen.sort(key=lambda pc: (0 if "text" in pc[0] else 1, pc[0].count(".")))
    ratio = None
    for path, node in seen:
        if not _shrink_heterogeneous(node, path, report, vocab, max_layers):
            _shrink_one(node, path, report, vocab, max_layers)
        if images:
            ratio = _shrink_image_size(node, path, report) or ratio
    if ratio:
        _shrink_image_tokens(seen, ratio, report)
    return report
