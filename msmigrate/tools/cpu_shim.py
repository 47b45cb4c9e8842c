"""CPU launcher shim for the MindSpeed-MM plugin-route trainer (works for the real trainer and the stand-in).

Usage (as the torchrun entry, from the target repo root):
    python -m torch.distributed.run --nproc_per_node 2 --master_port P \
        msmigrate/tools/cpu_shim.py <target>/mindspeed_mm/fsdp/train/trainer.py <config.yaml>

The vanilla trainer has no CPU path (it calls torch.accelerator.set_device_index and asks for an nccl/hccl
backend). This shim, without editing the target: (1) initialises a gloo process group first, so the trainer skips
its own backend selection; (2) makes torch.accelerator.set_device_index a no-op; (3) maps torch.cpu.manual_seed(_all)
to torch.manual_seed; (4) gives torch.cpu an empty_cache no-op; (5) lets DDP wrap a CPU module when the trainer
passes its accelerator namespace as ``device_ids`` (its single-shard DDP path: CPU modules take none); (6) makes
an averaging collective on a gloo group average (``gloo_averages``); then puts the target root on sys.path, rewrites
sys.argv to [trainer.py, config.yaml, ...] and runs the trainer as __main__. Standalone: imports nothing from msmigrate.

Launches are also made independent of what freshly allocated memory held (``deterministic_storage``): with
``init_model_with_meta_device`` the trainer gives the model storage with ``to_empty``, and a tensor nothing writes
afterwards (a non-persistent buffer when ``training.load`` skips ``init_weights``) used to hold whatever the
allocator returned: zeros on fresh pages, stale floats otherwise, so a gate passed or failed by luck. Torch's
``fill_uninitialized_memory`` fills every uninitialised allocation with NaN (floats) or the dtype's largest value
(integers), so such a tensor is wrong the same way in every run; and ``watch_first_forward`` names the first
parameter or buffer still holding that fill when the model's first forward starts, on a line the gates read
(``UNINITIALISED_MARK``).
"""
import os
import runpy
import sys


UNINITIALISED_MARK = "[msmigrate cpu-shim] uninitialised storage at the first forward:"
MAX_NAMED = 5  # tensors named on the line after the first


def _noop(*args, **kwargs):
    return None


def deterministic_storage():
    """Fill uninitialised storage (``torch.empty``/``empty_like``, hence ``Module.to_empty``) with NaN / the largest
    integer. Torch only fills while deterministic algorithms are on; warn-only, so an op without a deterministic
    kernel warns instead of failing the launch. A trainer that turns on strict mode itself (``use_deter_comp``)
    still can: this never turns it off. Costs one fill per allocation, small next to the CPU matmuls."""
    import torch

    if not torch.are_deterministic_algorithms_enabled():
        torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True


def _holds_fill(tensor):
    """(how many elements hold the fill value, how many there are, what the fill is) or None. Floats: NaN (any
    element: a NaN that reached a tensor is a NaN there either way); 32/64-bit integers: the dtype's largest value in
    every element (a legitimate integer buffer holds it nowhere, let alone everywhere)."""
    import torch

    if hasattr(tensor, "to_local"):  # an FSDP2 DTensor: this rank's shard
        tensor = tensor.to_local()
    if tensor.device.type == "meta" or tensor.numel() == 0:
        return None
    if tensor.is_floating_point() or tensor.is_complex():
        bad = int(torch.isnan(tensor).sum())
        return (bad, tensor.numel(), "NaN") if bad else None
    if tensor.dtype in (torch.int32, torch.int64):
        top = torch.iinfo(tensor.dtype).max
        if bool((tensor == top).all()):
            return tensor.numel(), tensor.numel(), f"{top}"
    return None


def uninitialised_tensors(model):
    """[(kind, name, detail)] of the parameters and buffers holding the fill value, in module order."""
    found = []
    with _no_grad():
        for name, param in model.named_parameters():
            fill = _holds_fill(param)
            if fill:
                found.append(("parameter", name, fill))
        for mod_name, module in model.named_modules():
            nonpersistent = getattr(module, "_non_persistent_buffers_set", set())
            for buf_name, buf in module._buffers.items():
                fill = _holds_fill(buf) if buf is not None else None
                if fill:
                    kind = "non-persistent buffer" if buf_name in nonpersistent else "buffer"
                    found.append((kind, f"{mod_name}.{buf_name}" if mod_name else buf_name, fill))
    return found


def _no_grad():
    import torch

    return torch.no_grad()


def uninitialised_line(model, found):
    kind, name, (bad, total, fill) = found[0]
    more = "; ".join(f"{k} `{n}`" for k, n, _ in found[1:1 + MAX_NAMED])
    extra = f" (also {len(found) - 1} more: {more}{', ...' if len(found) > 1 + MAX_NAMED else ''})" if more else ""
    return (f"{UNINITIALISED_MARK} {kind} `{name}` of {type(model).__name__} holds the fill value of uninitialised "
            f"memory ({fill} in {bad} of {total} elements): nothing wrote it after the storage was allocated "
            f"(to_empty after meta-device init){extra}")


def watch_first_forward(stream=None):
    """Before the first forward of a module with parameters (the trained model: the trainer calls it first),
    print ``UNINITIALISED_MARK`` naming what still holds the fill, then stop watching. Returns the hook handle."""
    from torch.nn.modules.module import register_module_forward_pre_hook

    handle = None

    def check(module, _args):
        if next(module.parameters(), None) is None:
            return None
        handle.remove()
        found = uninitialised_tensors(module)
        if found:
            print(uninitialised_line(module, found), file=stream or sys.stderr, flush=True)
        return None

    handle = register_module_forward_pre_hook(check)
    return handle


def accelerator_present():
    """Whether this host has a usable accelerator now. ``torch.accelerator.current_accelerator()`` names the one the
    torch build was compiled for: torch 2.7's CUDA wheel (the real MindSpeed-MM runtime's) says ``cuda`` on a host
    with no GPU, so a caller that took it for "an accelerator is here" skipped the CPU patches and gloo summed the
    2-rank training parity's gradients (2× in every group). ``is_available()`` asks the device at run time."""
    import torch

    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None:
        return False
    if hasattr(accelerator, "is_available"):
        return bool(accelerator.is_available())
    return accelerator.current_accelerator() is not None


def apply_cpu_patches():
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group(backend="gloo")
    torch.accelerator.set_device_index = _noop
    torch.cpu.manual_seed = lambda seed: torch.manual_seed(seed)
    torch.cpu.manual_seed_all = lambda seed: torch.manual_seed(seed)
    torch.cpu.empty_cache = _noop
    # The trainer swaps torch.accelerator for a proxy that copies torch.accelerator's attributes, so the no-op
    # above is what the proxy sees. Accelerator-level seeding/cache calls on torch>=2.8 need no accelerator-free
    # fallback beyond these (they are routed to torch.cpu by the proxy only when torch.accelerator lacks them).
    for name, fn in (("manual_seed", torch.cpu.manual_seed), ("manual_seed_all", torch.cpu.manual_seed_all),
                     ("empty_cache", _noop)):
        if hasattr(torch.accelerator, name) and not accelerator_present():
            setattr(torch.accelerator, name, fn)
    gloo_averages()


def gloo_averages():
    """FSDP2 reduces fp32/bf16 gradients with ``reduce_scatter_tensor(op=ReduceOp.AVG)`` (torch's ``foreach_reduce``:
    the mean over the data-parallel ranks, which NCCL/HCCL compute). Gloo in torch 2.7 (the real MindSpeed-MM's
    pin) runs that AVG as a SUM without a word, so every sharded gradient read N× the one-process mean over the
    global batch, and clipping and Adam's epsilon saw the wrong scale; its ``all_reduce`` refuses AVG outright. On a
    gloo group both run as SUM followed by a division by the group's size, which is the average on any torch; every
    other op and backend is passed through unchanged."""
    import torch.distributed as dist

    for name in ("reduce_scatter_tensor", "all_reduce"):
        original = getattr(dist, name)
        if getattr(original, "_msmigrate_gloo_avg", False):
            continue
        setattr(dist, name, _averaging(original, name == "all_reduce"))


def _averaging(original, tensor_first):
    import torch.distributed as dist

    def collective(*args, **kwargs):
        names = ("tensor",) if tensor_first else ("output", "input")
        bound = dict(zip(names + ("op", "group", "async_op"), args), **kwargs)
        op, group = bound.get("op", dist.ReduceOp.SUM), bound.get("group")
        if op != dist.ReduceOp.AVG or dist.get_backend(group) != "gloo":
            return original(*args, **kwargs)
        bound["op"] = dist.ReduceOp.SUM
        work = original(**bound)
        if work is not None:
            work.wait()  # the division needs the sum; an async caller's wait() then returns at once
        bound["tensor" if tensor_first else "output"].div_(dist.get_world_size(group))
        return work

    collective._msmigrate_gloo_avg = True
    return collective


def cpu_ddp_device_ids():
    """The trainer's ``fully_shard_parallel_size == 1`` path (no meta init) wraps the model in DDP with
    ``device_ids=[<accelerator namespace>]``; on the CPU that namespace is ``torch.cpu``, which DDP refuses for a CPU
    module. A CPU module gets ``device_ids=None``, as DDP expects; anything else is passed through unchanged."""
    from torch.nn.parallel import DistributedDataParallel

    original = DistributedDataParallel.__init__
    if getattr(original, "_msmigrate_cpu", False):
        return

    def init(self, module, device_ids=None, output_device=None, *args, **kwargs):
        on_cpu = all(p.device.type == "cpu" for p in module.parameters())
        if on_cpu and device_ids is not None and not any(isinstance(d, int) for d in device_ids):
            device_ids, output_device = None, None
        original(self, module, device_ids, output_device, *args, **kwargs)

    init._msmigrate_cpu = True
    DistributedDataParallel.__init__ = init


def target_root(trainer_path):
    """<root>/mindspeed_mm/fsdp/train/trainer.py -> <root>."""
    path = os.path.abspath(trainer_path)
    for _ in range(4):
        path = os.path.dirname(path)
    return path


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: cpu_shim.py <target>/mindspeed_mm/fsdp/train/trainer.py <config.yaml> [key=value ...]\n")
        return 2
    trainer, rest = argv[0], argv[1:]
    os.environ.setdefault("NON_MEGATRON", "true")
    root = target_root(trainer)
    # Look like `python trainer.py`: sys.path[0] is the trainer's folder (not this shim's), then the repo root.
    shim_dir = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != shim_dir]
    sys.path.insert(0, os.path.dirname(os.path.abspath(trainer)))
    if root not in sys.path:
        sys.path.insert(1, root)
    apply_cpu_patches()
    cpu_ddp_device_ids()
    deterministic_storage()
    watch_first_forward()
    sys.argv = [trainer] + rest
    runpy.run_path(trainer, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
