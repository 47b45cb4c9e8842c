"""Shared by the probes that build the target's own models or datasets outside torchrun (runs in the target
runtime; imports nothing from msmigrate).

Real framework code assumes the trainer's setup: the qwen3vl forward asks ``get_parallel_state()`` for its groups,
the huggingface dataset enters ``TrainingArguments(...).main_process_first()`` (which needs RANK / MASTER_ADDR and a
process group). ``start_single_rank`` reproduces that setup for one CPU process: torchrun's environment variables,
a 1-rank gloo group and the launcher's CPU patches (the same ``cpu_shim.apply_cpu_patches`` the training gates use),
then the target's own ``init_parallel_state`` with every parallel size 1 — never an edit to the target. Under torchrun
(``WORLD_SIZE`` already set, e.g. the 2-rank training parity) the same setup joins torchrun's group instead, with the
data-parallel and fully-shard sizes equal to the world size, as the trainer's own 2-rank gate launch has them."""
import importlib.util
import os
import socket

_SHIM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cpu_shim.py")


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_shim():
    spec = importlib.util.spec_from_file_location("msmigrate_cpu_shim", _SHIM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# How a failure of the setup itself is said (the classify node reads it: knowledge/failure_context.py's
# RUNTIME_SETUP_SAID): torch.distributed and the runtime only, before the target's parallel state and the run's code
RUNTIME_SETUP = "the runtime's own 1-rank process-group setup failed (torch.distributed alone, before any code of the run)"


def start_single_rank():
    """torchrun-like env + 1-rank gloo group + CPU patches + the target's parallel state (when it has one).
    Returns what was done, for the probe's result."""
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_WORLD_SIZE", "1"),
                       ("MASTER_ADDR", "127.0.0.1")):
        os.environ.setdefault(key, value)
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    import torch.distributed as dist

    done = {"process_group": "existing" if dist.is_initialized() else "gloo (1 rank)"}
    shim = _cpu_shim()
    try:
        # on an accelerator the framework's own path runs; a CUDA build of torch on a host without a GPU is a CPU
        # host (``accelerator_present``: the compile-time accelerator is not the device)
        if not shim.accelerator_present():
            shim.apply_cpu_patches()
            done["cpu_patches"] = True
        elif not dist.is_initialized():
            dist.init_process_group(backend="gloo")
    except Exception as exc:  # probe boundary: said as the runtime's own setup, which runs none of the run's code
        raise RuntimeError(f"{RUNTIME_SETUP}: {type(exc).__name__}: {exc}") from exc
    try:
        from mindspeed_mm.fsdp.distributed import parallel_state
    except ImportError:
        done["parallel_state"] = "none in target"
        return done
    init = getattr(parallel_state, "init_parallel_state", None)
    if callable(init):
        world = int(os.environ["WORLD_SIZE"])
        init(data_parallel_size=world, fully_shard_parallel_size=world)
        done["parallel_state"] = f"init_parallel_state(data/fully-shard size {world})"
    return done
