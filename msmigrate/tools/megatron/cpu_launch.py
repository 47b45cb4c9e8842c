"""The delivered training launch on this CPU: ``torchrun`` of the target's own ``pretrain_vlm.py`` with the delivered
model JSON, data JSON and converted weights, for a few iterations, at a given TP over gloo ranks, under msmigrate's
CPU shim (``tools/megatron_cpu``: the launched processes put its sitecustomize first on PYTHONPATH; the checkout is
never edited). The log is Megatron's own; the loss is read from its iteration lines (train_log.py).

The delivered script's flags are kept except what a short CPU run must change, each named in ``CpuLaunch.changed``:
the sizes (TP as asked, PP/CP 1, global batch = micro batch x data-parallel ranks: one micro batch per step), the
backend (gloo), ``--train-iters`` (a few), ``--load`` (the conversion made at this TP), ``--save`` (a scratch folder,
never the checkout), no evaluation, no data workers, and the learning rate: the delivered fine-tuning rate (1e-5
with warm-up) moves a tiny model's loss by less than the sample-to-sample spread in a few steps, so the run uses
``CPU_LR`` without warm-up; a loss that still does not fall then says the loop does not learn.
"""

from __future__ import annotations

import os
import shlex
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.launcher.command import free_port
from msmigrate.tools.megatron.cpu_preflight import shim_env
from msmigrate.tools.megatron.real_step import KERNEL_LINE, MISSING_LINE
from msmigrate.tools.megatron.train_log import loaded_from, training_verdict
from msmigrate.tools.runtime import run_process

CPU_ITERS = 3
CPU_LR = "1e-3"
LAUNCH_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CUDA_DEVICE_MAX_CONNECTIONS": "1",
              "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}


@dataclass
class CpuLaunch:
    ok: bool = False
    tp: int = 1
    ranks: int = 1
    command: str = ""
    load: str = ""  # the converted checkpoint it loads (made at this TP)
    losses: list[tuple[int, float]] = field(default_factory=list)  # (iteration, loss) from the log
    problems: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)  # torch_npu kernels the ranks ran as CPU references
    missing_kernel: str | None = None  # a torch_npu name the run needed that the shim has no CPU version of
    changed: dict[str, Any] = field(default_factory=dict)  # delivered flag -> (delivered value, this run's)
    returncode: int | None = None
    seconds: float = 0.0
    log_tail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def launch_flags(flags: dict[str, Any], *, tp: int, ranks: int, load: str, save: str,
                 iters: int = CPU_ITERS) -> tuple[list[str], dict[str, Any]]:
    """(argv after pretrain_vlm.py, {flag: (delivered value, this run's)}) for a short CPU run at ``tp``."""
    mbs = str(flags.get("--micro-batch-size") or "1")
    dp = max(ranks // tp, 1)
    want = {"--tensor-model-parallel-size": str(tp), "--pipeline-model-parallel-size": "1",
            "--context-parallel-size": "1", "--global-batch-size": str(int(mbs) * dp), "--train-iters": str(iters),
            "--distributed-backend": "gloo", "--num-workers": "0", "--load": load, "--save": save,
            "--save-interval": str(iters * 1000), "--eval-interval": str(iters * 1000), "--eval-iters": "0",
            "--lr": CPU_LR, "--lr-warmup-fraction": "0"}
    out, changed = dict(flags), {}
    for k, v in want.items():
        if str(out.get(k)) != v:
            changed[k] = (out.get(k), v)
        out[k] = v
    for k in ("--lr-warmup-iters", "--lr-warmup-samples"):  # exclusive with the fraction set above
        if k in out:
            changed[k] = (out.pop(k), None)
    argv: list[str] = []
    for k, v in out.items():
        argv += [k] if v is True else [k, str(v)]
    return argv, changed


def launch_result(res: CpuLaunch, log: str, *, timed_out: bool, timeout: float, iters: int,
                  load: str | None = None) -> CpuLaunch:
    """Fill ``res`` from the launch's log and exit (apart from the launch so it is tested on recorded logs)."""
    res.kernels = sorted({f"{m.group(1)}({m.group(2)})" for m in KERNEL_LINE.finditer(log)})
    missing = MISSING_LINE.findall(log)
    res.missing_kernel = missing[0] if missing else None
    res.losses, problems = training_verdict(log, iters)
    if load is not None and str(load) not in loaded_from(log):
        problems.append(f"the log does not say the converted checkpoint {load} loaded (a run from random weights "
                        "proves nothing about them)")
    if timed_out:
        problems.insert(0, f"torchrun timed out after {timeout:.0f}s")
    elif res.returncode != 0:
        problems.insert(0, f"torchrun exited {res.returncode}")
    res.problems, res.ok = problems, not problems
    res.log_tail = log[-3000:]
    return res


def cpu_launch(runtime_python: str, target: Path, flags: dict[str, Any], *, tp: int, ranks: int, load: Path,
               entry: str = "pretrain_vlm.py", iters: int = CPU_ITERS, timeout: float = 900.0) -> CpuLaunch:
    bin_dir = str(Path(runtime_python).parent)
    with tempfile.TemporaryDirectory(prefix="msmigrate-cpu-launch-") as save:
        argv, changed = launch_flags(flags, tp=tp, ranks=ranks, load=str(Path(load).resolve()), save=save,
                                     iters=iters)
        cmd = [runtime_python, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(ranks),
               "--master_addr", "127.0.0.1", "--master_port", str(free_port()), entry, *argv]
        res = CpuLaunch(tp=tp, ranks=ranks, command=shlex.join(cmd), changed=changed, load=str(Path(load).resolve()))
        t0 = time.time()
        # the dataset helper Megatron compiles at init runs `python3 -m pybind11` from PATH: the runtime's
        env = {**LAUNCH_ENV, **shim_env(target), "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        out = run_process(cmd, cwd=target, env_extra=env, timeout=timeout)
        res.returncode, res.seconds = out.returncode, round(time.time() - t0, 1)
    return launch_result(res, out.stdout + out.stderr, timed_out=out.timed_out, timeout=timeout, iters=iters,
                         load=res.load)
