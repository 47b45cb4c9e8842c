"""The CPU patches make an averaging collective on a gloo group average (``cpu_shim.gloo_averages``): FSDP2 reduces
fp32 gradients with ``reduce_scatter_tensor(op=AVG)`` and gloo in torch 2.7 (the real MindSpeed-MM's pin) ran it as a
SUM, so every sharded gradient read N× the one-process mean over the global batch."""

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

SHIM = Path(__file__).resolve().parents[2] / "msmigrate" / "tools" / "cpu_shim.py"


def _shim():
    spec = importlib.util.spec_from_file_location("shim_under_test", SHIM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class SummingGloo:
    """torch 2.7's gloo reduce-scatter: whatever the op, the ranks' chunks are summed (here: 2 ranks, both holding
    ``input``); records the ops it was asked for."""

    def __init__(self):
        self.ops = []

    def reduce_scatter_tensor(self, output, input, op=dist.ReduceOp.SUM, group=None, async_op=False):
        self.ops.append(op)
        output.copy_(2 * input.view(2, -1)[0])

    def all_reduce(self, tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        if op == dist.ReduceOp.AVG:
            raise RuntimeError("Cannot use ReduceOp.AVG with Gloo")
        self.ops.append(op)
        tensor.mul_(2)


@pytest.fixture
def gloo(monkeypatch):
    fake = SummingGloo()
    monkeypatch.setattr(dist, "reduce_scatter_tensor", fake.reduce_scatter_tensor)
    monkeypatch.setattr(dist, "all_reduce", fake.all_reduce)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    backend = {"name": "gloo"}
    monkeypatch.setattr(dist, "get_backend", lambda group=None: backend["name"])
    _shim().gloo_averages()
    return fake, backend


def test_avg_on_gloo_is_a_sum_divided_by_the_group_size(gloo):
    fake, _ = gloo
    out = torch.empty(2)
    dist.reduce_scatter_tensor(output=out, input=torch.tensor([1.0, 3.0, 1.0, 3.0]), op=dist.ReduceOp.AVG)
    assert out.tolist() == [1.0, 3.0] and fake.ops == [dist.ReduceOp.SUM]
    t = torch.tensor([2.0, 4.0])
    dist.all_reduce(t, dist.ReduceOp.AVG)  # positional op, as the engine's callers pass it
    assert t.tolist() == [2.0, 4.0]


def test_other_ops_and_backends_pass_through_and_the_patch_applies_once(gloo):
    fake, backend = gloo
    out = torch.empty(2)
    dist.reduce_scatter_tensor(out, torch.tensor([1.0, 3.0, 1.0, 3.0]))  # SUM stays a sum
    assert out.tolist() == [2.0, 6.0]
    _shim().gloo_averages()  # a second application wraps nothing twice
    dist.reduce_scatter_tensor(out, torch.tensor([1.0, 3.0, 1.0, 3.0]), dist.ReduceOp.AVG)
    assert out.tolist() == [1.0, 3.0]
    backend["name"] = "nccl"  # NCCL/HCCL average themselves: the call goes through as asked
    dist.reduce_scatter_tensor(out, torch.tensor([1.0, 3.0, 1.0, 3.0]), dist.ReduceOp.AVG)
    assert fake.ops[-1] == dist.ReduceOp.AVG


PROBES = SHIM.parent / "probes"


@pytest.fixture
def cuda_build_without_gpu(monkeypatch):
    """torch 2.7's CUDA wheel on a host with no GPU (the real MindSpeed-MM runtime here): the accelerator it was
    compiled for is cuda, none is available."""
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda check_available=False: torch.device("cuda"))
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)


def test_a_cuda_build_of_torch_without_a_gpu_is_a_cpu_host(cuda_build_without_gpu, monkeypatch):
    shim = _shim()
    assert shim.accelerator_present() is False
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    assert shim.accelerator_present() is True


def test_the_probe_ranks_average_on_a_cuda_build_without_a_gpu(gloo, cuda_build_without_gpu, monkeypatch):
    """The 2× a real-MM G6 training parity read after the shim fix: the probes' rank setup took the compile-time
    accelerator for a device and skipped the CPU patches, so gloo's reduce-scatter summed. Through the probes' own
    ``start_single_rank``, FSDP2's AVG reduce-scatter now reads the mean on such a host."""
    import sys

    fake, _ = gloo
    plain = SummingGloo()  # the collectives as they are before any patch (the fixture's are already wrapped)
    monkeypatch.setattr(dist, "reduce_scatter_tensor", plain.reduce_scatter_tensor)
    monkeypatch.setattr(dist, "all_reduce", plain.all_reduce)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)  # torchrun's ranks: the group exists
    for module, names in ((torch.accelerator, ("set_device_index", "manual_seed", "manual_seed_all", "empty_cache")),
                          (torch.cpu, ("manual_seed", "manual_seed_all", "empty_cache"))):
        for name in names:  # the CPU patches rebind these: restored after the test
            if hasattr(module, name):
                monkeypatch.setattr(module, name, getattr(module, name))
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.setenv(key, "0" if "RANK" in key else "1")
    monkeypatch.setitem(sys.modules, "mindspeed_mm", None)  # no target parallel state to set up here
    monkeypatch.syspath_prepend(str(PROBES))
    monkeypatch.delitem(sys.modules, "_single_rank", raising=False)
    import _single_rank

    done = _single_rank.start_single_rank()
    out = torch.empty(2)
    dist.reduce_scatter_tensor(output=out, input=torch.tensor([1.0, 3.0, 1.0, 3.0]), op=dist.ReduceOp.AVG)
    assert out.tolist() == [1.0, 3.0], "2× the mean: the CPU patches were skipped"
    assert plain.ops == [dist.ReduceOp.SUM] and done.get("cpu_patches") is True
