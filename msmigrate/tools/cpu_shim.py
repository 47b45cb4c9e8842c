"""CPU launcher shim for the MindSpeed-MM plugin-route trainer (works for the real trainer and the stand-in).

Usage (as the torchrun entry, from the target repo root):
    python -m torch.distributed.run --nproc_per_node 2 --master_port P \
        msmigrate/tools/cpu_shim.py <target>/mindspeed_mm/fsdp/train/trainer.py <config.yaml>

The vanilla trainer has no CPU path (it calls torch.accelerator.set_device_index and asks for an nccl/hccl
backend). This shim, without editing the target: (1) initialises a gloo process group first, so the trainer skips
its own backend selection; (2) makes torch.accelerator.set_device_index a no-op; (3) maps torch.cpu.manual_seed(_all)
to torch.manual_seed; (4) gives torch.cpu an empty_cache no-op; then puts the target root on sys.path, rewrites
sys.argv to [trainer.py, config.yaml, ...] and runs the trainer as __main__. Standalone: imports nothing from msmigrate.
"""
import os
import runpy
import sys


def _noop(*args, **kwargs):
    return None


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
        if hasattr(torch.accelerator, name) and torch.accelerator.current_accelerator() is None:
            setattr(torch.accelerator, name, fn)


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
    sys.argv = [trainer] + rest
    runpy.run_path(trainer, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
