"""Device helpers: cuda > npu > cpu. There is deliberately no CPU-only communication backend (as in the real code)."""
import logging
import sys
import types
from typing import Any

import torch

logger = logging.getLogger(__name__)

IS_CUDA_AVAILABLE = torch.cuda.is_available()
try:
    import torch_npu  # noqa: F401

    IS_NPU_AVAILABLE = True
except Exception:  # any failure means "no NPU" (mirrors the real probe)
    IS_NPU_AVAILABLE = False


def get_device_type() -> str:
    if IS_CUDA_AVAILABLE:
        return "cuda"
    if IS_NPU_AVAILABLE:
        return "npu"
    return "cpu"


def get_torch_device() -> Any:
    """torch.cuda / torch.npu / torch.cpu."""
    return getattr(torch, get_device_type())


def get_dist_comm_backend(cpu: bool = False) -> str:
    if cpu:
        if IS_CUDA_AVAILABLE:
            return "cpu:gloo,cuda:nccl"
        if IS_NPU_AVAILABLE:
            return "cpu:gloo,npu:hccl"
    if IS_CUDA_AVAILABLE:
        return "nccl"
    if IS_NPU_AVAILABLE:
        return "hccl"
    raise RuntimeError(f"No available distributed communication backend found on device type {get_device_type()}.")


def set_accelerator_compatible(fallback_module=None):
    """Replace torch.accelerator by a proxy module whose missing attributes fall back to `fallback_module`."""
    proxy = types.ModuleType("torch.accelerator")
    for attr in dir(torch.accelerator):
        if not attr.startswith("__"):
            setattr(proxy, attr, getattr(torch.accelerator, attr))

    def __getattr__(name):
        if hasattr(fallback_module, name):
            value = getattr(fallback_module, name)
            setattr(proxy, name, value)
            return value
        raise AttributeError(f"module {proxy} and {fallback_module} has no attribute {name}.")

    proxy.__getattr__ = __getattr__
    torch.accelerator = proxy
    sys.modules["torch.accelerator"] = proxy


def memory_stats_mb():
    """(allocated, max allocated, reserved, max reserved) in MB; zeros on CPU."""
    dev = get_torch_device()
    if get_device_type() == "cpu":
        return 0.0, 0.0, 0.0, 0.0
    mb = 1024 * 1024
    return (dev.memory_allocated() / mb, dev.max_memory_allocated() / mb,
            dev.memory_reserved() / mb, dev.max_memory_reserved() / mb)
