"""Loading a Hugging Face safetensors folder straight into the (possibly FSDP2-sharded) model, no conversion step
(contract: the real ``fsdp/checkpoint/hf_utils.py``).

``training.load`` names the folder; with ``load_format: auto`` it counts as HF weights when it holds
``model.safetensors`` or ``model.safetensors.index.json`` (otherwise it is read as a DCP checkpoint). Every rank reads
the full tensors and keeps its own shard; checkpoint keys go through the model's ``_checkpoint_conversion_mapping``
(transformers 4.x saves the legacy names; on transformers 5 the stand-in reads the same renamings from the library's
conversion registry; a class whose nearest library ancestor is the bare ``PreTrainedModel``, vendored remote code,
keeps its keys, as the base's empty mapping does on 4.x) before they are matched with the parameter names. Parameters the files do
not hold stay as they were and are named in a warning; keys the model does not have are logged.
"""
import json
import logging
import os
import re

import torch

from mindspeed.fsdp.utils.log import print_rank

logger = logging.getLogger(__name__)

SAFE_WEIGHTS_NAME = "model.safetensors"
SAFE_WEIGHTS_INDEX_NAME = "model.safetensors.index.json"


def looks_like_hf_weight_dir(path):
    if not path or not os.path.isdir(path):
        return False
    return os.path.isfile(os.path.join(path, SAFE_WEIGHTS_NAME)) or os.path.isfile(
        os.path.join(path, SAFE_WEIGHTS_INDEX_NAME))


def _renamer(model):
    """key -> model key: the class's ``_checkpoint_conversion_mapping`` (transformers 4.x, what the real loader reads:
    first matching pattern wins); on transformers 5, which has no such attribute, the library's own renaming of the
    transformers class the model derives from (its renamings chain, as from_pretrained applies them)."""
    mapping = getattr(model, "_checkpoint_conversion_mapping", None)
    if mapping:
        pairs = [(p, re.sub(r"\(.*\)", "", r.lstrip("^"))) for p, r in mapping.items()]

        def first_match(key):
            for pattern, replacement in pairs:
                new_key, hits = re.subn(pattern, replacement, key)
                if hits:
                    return new_key
            return key

        return first_match
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightRenaming, rename_source_key
    except ImportError:
        return lambda key: key
    from transformers import PreTrainedModel

    # the registry looks classes up by name and skips classes defined outside transformers (a plugin subclass, its
    # FSDP wrapper): ask it about the transformers class the model derives from, built on the meta device. A class
    # whose nearest transformers ancestor is the library's base (vendored remote code) reads the base's empty
    # mapping on 4.x, so the real loader leaves its keys as they are: never build the bare base for it
    upstream = next((c for c in type(model).__mro__ if c.__module__.startswith("transformers.")
                     and hasattr(c, "_from_config")), None)
    if upstream is None or upstream is PreTrainedModel or getattr(model, "config", None) is None:
        return lambda key: key
    from accelerate import init_empty_weights

    with init_empty_weights():
        reference = upstream._from_config(model.config)
    renamings = [t for t in get_model_conversion_mapping(reference) if isinstance(t, WeightRenaming)]
    return lambda key: rename_source_key(key, renamings, [])[0]


def convert_weight_key(key, model):
    return _renamer(model)(key)


def _weight_files(hf_dir):
    index = os.path.join(hf_dir, SAFE_WEIGHTS_INDEX_NAME)
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as f:
            return [os.path.join(hf_dir, name) for name in sorted(set(json.load(f)["weight_map"].values()))]
    return [os.path.join(hf_dir, SAFE_WEIGHTS_NAME)]


def _write_full_tensor(target, full):
    full = full.to(dtype=target.dtype)
    if hasattr(target, "device_mesh"):  # a DTensor shard: cut this rank's piece out of the full tensor locally
        from torch.distributed.tensor import distribute_tensor

        piece = distribute_tensor(full, target.device_mesh, target.placements, src_data_rank=None)
        target.to_local().copy_(piece.to_local())
    else:
        target.copy_(full.to(target.device))


@torch.no_grad()
def load_hf_weights(model, hf_dir, enable_lora=False, load_strict=False, weight_transform=None):
    from safetensors import safe_open

    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    missing, unexpected = set(params), set()
    rename = _renamer(model)
    for path in _weight_files(hf_dir):
        with safe_open(path, framework="pt", device="cpu") as shard:
            for raw_key in shard.keys():
                key = rename(raw_key)
                if weight_transform is not None:
                    key, tensor = weight_transform.hf_to_dcp(key, shard.get_tensor(raw_key))
                else:
                    tensor = shard.get_tensor(raw_key)
                if key in params:
                    missing.discard(key)
                    _write_full_tensor(params[key].data, tensor)
                elif key in buffers:
                    _write_full_tensor(buffers[key], tensor)
                else:
                    unexpected.add(key)
    if unexpected:
        shown = "" if len(unexpected) <= 5 else f" (showing 5 of {len(unexpected)})"
        print_rank(logger.info, f"HF checkpoint had {len(unexpected)} key(s) not present in the model. "
                                f"Examples{shown}: {sorted(unexpected)[:5]}")
    missing = {k for k in missing if "lora_" not in k}
    if missing:
        if load_strict:
            raise RuntimeError(f"{len(missing)} parameter key(s) absent from the HF checkpoint "
                               f"(load_strict=True): {sorted(missing)}")
        logger.warning("%d parameter key(s) absent from the HF checkpoint and left uninitialized: %s.",
                       len(missing), sorted(missing))


def load_hf_checkpoint(model, path, load_strict=False):
    """The HF branch of the engine's load: log what is read, then fill the model (a release load: iteration 0)."""
    cfg = {}
    if os.path.isfile(os.path.join(path, "config.json")):
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
    text = cfg.get("text_config", cfg)
    print_rank(logger.info, f"Loading HF safetensors -> FSDP DTensors via every-rank-read (online): dir={path} "
                            f"arch={(cfg.get('architectures') or ['?'])[0]} "
                            f"layers={text.get('num_hidden_layers', '?')} "
                            f"tie_emb={cfg.get('tie_word_embeddings', text.get('tie_word_embeddings', '?'))}")
    load_hf_weights(model, path, load_strict=load_strict)
