"""Meta-device materialisation as the real framework's trainer does it (contract: the real ``fsdp/utils/utils.py``).

ModelHub builds under ``accelerate.init_empty_weights()``: parameters on meta, buffers computed for real on the CPU.
``to_empty_if_needed`` then gives the PARAMETERS fresh, uninitialised storage on ``device`` and moves the buffers
there with their values (``Module.to_empty`` would empty the buffers too and run a plugin's ``to_empty`` override;
the real trainer never calls it). ``init_model_weights`` resets each module's initialised flags and calls the
model's ``init_weights()``; the trainer calls it only without ``training.load``.
"""
import torch

from mindspeed_mm.fsdp.utils.device import get_device_type


def to_empty_if_needed(model, device, recurse=True):
    device = torch.empty((), device=device).device

    def storage(tensor):
        if isinstance(tensor, torch.nn.Parameter):  # new, uninitialised storage unless already there
            return tensor if tensor.device == device else torch.empty_like(tensor, device=device)
        # a buffer keeps what __init__ computed; only a CPU one is moved (to the accelerator, as the real code does)
        return tensor.to(device=get_device_type()) if tensor.device == torch.device("cpu") else tensor

    return model._apply(storage, recurse=recurse)


def init_model_weights(model):
    for module in model.modules():  # a module marked initialised would be skipped by init_weights
        module._is_initialized = False
        if getattr(module, "_is_hf_initialized", False):
            module._is_hf_initialized = False
    model.init_weights()
