"""Fits of the built parts to one another that the family's defaults leave disagreeing, each measured on the built
model or processor, never keyed on a family: a rotary section list the code defaults to, an image processor's tile
size and a processor's media-token count per tile.

- ``fit_rotary_sections``: a rotary module's ``*section*`` list (a code default the config lacks) must split the
  frequencies the module computes (``inv_freq``); the config gets it rescaled to them.
- ``fit_tiles``: an image processor that cuts every image into tiles of one fixed side (measured: two images of
  different sizes give tiles of the same side) feeds each tile to the tower, so that side is the tower's input
  size; its longest-edge sizes in pixels (the tile's and the resize before the split) are scaled by tower / tile.
- ``fit_media_count``: after the tiles changed, the processor's count of media tokens per tile follows the
  features the model gives for the processor's own pixels (measured with ``get_image_features``).
"""

from __future__ import annotations

import inspect
import re

from PIL import Image

# a processor setting that counts media tokens per image or tile (``image_seq_len``, ``image_seq_length`` …)
MEDIA_COUNT = re.compile(r"^(\w*tokens_per_image|image_seq_len(gth)?|num_image_tokens)$")


def is_int(value) -> bool:
    """A positive int that is not a bool (a size or count a config or processor states)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def fit_rotary_sections(model, cfg) -> dict[str, tuple[list, list]]:
    """Rotary section lists the family's code falls back to when the config states none, made explicit in the
    config and rescaled to the rotary half the code computes: a rotary module holding an ``inv_freq`` buffer (one
    frequency per rotary pair) and an int list attribute named ``*section*`` that the config's rope dict lacks
    splits those frequencies, so it must sum to their count. A default written for the family's real rotary dim
    (e.g. a partial rotary factor the default config does not state) does not fit the shrunk one; the config then
    carries the section, split as the default splits it. Only a module that fails on its default is fitted
    (measured: one call on a short sequence); code that slices the frequencies by the sections (an interleaved
    layout) tolerates a longer list and is left as the family wrote it. Returns field path -> (default, written)."""
    from transformers import PretrainedConfig

    fitted: dict[str, tuple[list, list]] = {}
    for module in model.modules():
        freqs, config = getattr(module, "inv_freq", None), getattr(module, "config", None)
        if freqs is None or not isinstance(config, PretrainedConfig) or _rotary_runs(module):
            continue
        half = int(freqs.numel())
        for attr, value in vars(module).items():
            if "section" not in attr or not isinstance(value, (list, tuple)) or not value \
                    or not all(is_int(v) for v in value) or sum(value) == half:
                continue
            for path, node in config_nodes(cfg):
                rope_key = next((k for k in ("rope_parameters", "rope_scaling")
                                 if isinstance(getattr(node, k, None), dict)), None)
                if type(node) is not type(config) or rope_key is None or attr in getattr(node, rope_key) \
                        or getattr(node, rope_key) != getattr(config, rope_key, None):
                    continue
                scaled = [max(1, v * half // sum(value)) for v in value]
                scaled[-1] += half - sum(scaled)
                setattr(node, rope_key, {**getattr(node, rope_key), attr: scaled})
                fitted[f"{path}{rope_key}.{attr}"] = (list(value), scaled)
    return fitted


def _rotary_runs(module) -> bool:
    """Whether a rotary module computes its cos / sin for a short sequence (``forward(x, position_ids)``)."""
    import torch

    x = torch.zeros(1, 4, 8, dtype=module.inv_freq.dtype)
    try:  # a batch item: the family's own rotary code decides whether it takes this call
        with torch.no_grad():
            module(x, torch.arange(4)[None])
    except Exception:  # noqa: BLE001
        return False
    return True


def config_nodes(cfg) -> list[tuple[str, object]]:
    """The config tree's nodes with their dotted paths, top level first."""
    from transformers import PretrainedConfig

    nodes, todo = [], [("", cfg)]
    while todo:
        path, node = todo.pop(0)
        nodes.append((path, node))
        todo.extend((f"{path}{k}.", v) for k, v in vars(node).items() if isinstance(v, PretrainedConfig))
    return nodes


def _size_items(value) -> dict | None:
    """A size setting's set keys and values (a dict, or a SizeDict that lists unset keys as None)."""
    items = value if isinstance(value, dict) else vars(value) if hasattr(value, "__dict__") and \
        type(value).__name__ == "SizeDict" else None
    return None if items is None else {k: v for k, v in items.items() if v is not None}


def _tile_side(image_processor, width: int, height: int) -> int | None:
    """The side of the square tiles ``image_processor`` makes of one ``width`` x ``height`` image (None when its
    pixels are not square tiles, or it cannot be called so)."""
    image = Image.new("RGB", (width, height), (90, 120, 150))
    try:  # a batch item: the family's own processor code decides whether it takes this call
        pixels = image_processor(images=[image], return_tensors="pt")["pixel_values"]
    except Exception:  # noqa: BLE001
        return None
    shape = getattr(pixels, "shape", None)
    if shape is None or len(shape) < 3 or shape[-1] != shape[-2]:
        return None
    return int(shape[-1])


def fit_tiles(image_processor, side: int) -> dict[str, tuple[int, int]]:
    """Scale the longest-edge pixel sizes of a processor that makes fixed tiles so its tiles are ``side`` (the
    tower's input size). Sizes in dicts holding a longest edge alone are sides in pixels (ones next to a shortest
    edge can be pixel areas, and those processors make no fixed tile); each is scaled by ``side`` / tile. Kept only
    where the tiles then measure ``side``. Returns setting.key -> (old, new)."""
    tiles = {_tile_side(image_processor, 64, 48), _tile_side(image_processor, 150, 100)}
    tile = tiles.pop() if len(tiles) == 1 else None
    if not is_int(tile) or not is_int(side) or tile == side:
        return {}
    changed, before = {}, {}
    for attr, value in list(vars(image_processor).items()):
        items = _size_items(value)
        if items is None or set(items) != {"longest_edge"} or not is_int(items["longest_edge"]):
            continue
        old = items["longest_edge"]
        new = max(1, round(old / tile)) * side  # as many tiles a side as before, at least one
        before[attr] = value
        setattr(image_processor, attr, {"longest_edge": new})
        changed[f"{attr}.longest_edge"] = (old, new)
    if changed and _tile_side(image_processor, 64, 48) != side:
        for attr, value in before.items():
            setattr(image_processor, attr, value)
        return {}
    return changed


def _feature_count(output) -> int | None:
    """How many feature vectors ``get_image_features`` returned: a tensor's rows over its last dim, or a list's sum
    (a model output's ``pooler_output`` when it is a list of per-image features, else its tensor)."""
    import torch

    if not torch.is_tensor(output) and not isinstance(output, (list, tuple)):
        output = getattr(output, "pooler_output", None)
    if torch.is_tensor(output):
        return output.numel() // output.shape[-1] if output.dim() >= 2 else None
    if isinstance(output, (list, tuple)) and output and all(torch.is_tensor(t) and t.dim() >= 1 for t in output):
        return sum(t.numel() // t.shape[-1] for t in output)
    return None


def fit_media_count(processor, model, media_id: int) -> dict[str, tuple[int, int]]:
    """Set the processor's media-token count per tile (``MEDIA_COUNT``) to the features the model gives per tile,
    measured: the processor is called on one image, the ids ``media_id`` it writes are counted (count x tiles), and
    the model's ``get_image_features`` runs on the processor's pixel inputs. Returns setting -> (old, new)."""
    import torch

    settings = [(k, v) for k, v in vars(processor).items() if MEDIA_COUNT.match(k) and is_int(v)]
    placeholder = getattr(processor, "image_token", None)
    placeholder = getattr(placeholder, "content", placeholder)
    if len(settings) != 1 or not isinstance(placeholder, str) or not hasattr(model, "get_image_features"):
        return {}
    (attr, value), = settings
    image = Image.new("RGB", (64, 48), (90, 120, 150))
    accepted = inspect.signature(model.get_image_features).parameters
    try:  # a batch item: the family's own processor / model code decides whether it takes this call
        batch = processor(text=[f"look {placeholder} here"], images=[image], return_tensors="pt")
        inputs = {k: v for k, v in batch.items() if k in accepted and k not in ("input_ids", "attention_mask")}
        with torch.no_grad():
            features = _feature_count(model.get_image_features(**inputs))
    except Exception:  # noqa: BLE001
        return {}
    written = int((batch["input_ids"] == media_id).sum())
    if not features or not written or written == features or written % value:
        return {}
    tiles = written // value
    if features % tiles:
        return {}
    setattr(processor, attr, features // tiles)
    return {attr: (value, features // tiles)}
