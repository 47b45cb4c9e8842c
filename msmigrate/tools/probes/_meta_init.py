"""Building a model the way the target's trainer does (on the meta device, then given storage) — shared by
``model_parity.py`` and ``forward_smoke.py``. Runs in the target runtime; imports nothing from msmigrate."""

import copy


def build(cls, config, meta=False):
    import torch

    config = copy.deepcopy(config)
    if meta:
        from accelerate import init_empty_weights

        with init_empty_weights():
            model = cls._from_config(config) if hasattr(cls, "_from_config") else cls(config)
        for module in model.modules():  # as ModelHub does: a later init_weights must not skip them
            if getattr(module, "_is_hf_initialized", False):
                module._is_hf_initialized = False
        return model.float()
    with torch.device("cpu"):
        model = cls._from_config(config) if hasattr(cls, "_from_config") else cls(config)
    return model.float()


def materialize(model):
    """Give meta tensors storage the way the target's trainer does (its ``to_empty_if_needed`` where it has one,
    else ``Module.to_empty`` — a plugin's ``to_empty`` override runs there). Returns how."""
    try:
        from mindspeed_mm.fsdp.utils.utils import to_empty_if_needed
    except ImportError:
        model.to_empty(device="cpu")
        return "Module.to_empty"
    to_empty_if_needed(model, device="cpu")
    return "to_empty_if_needed"


def retie(model):
    """The trainer's retie after a load, where the target has one."""
    try:
        from mindspeed_mm.fsdp.checkpoint.utils import retie_embeddings
    except ImportError:
        return False
    retie_embeddings(model)
    return True


def persistent_keys(model):
    """State-dict keys minus non-persistent buffers (what a checkpoint holds), and the non-persistent ones."""
    nonpersistent = []
    for name, module in model.named_modules():
        for buf in getattr(module, "_non_persistent_buffers_set", ()):
            nonpersistent.append(f"{name}.{buf}" if name else buf)
    return nonpersistent
