"""Running a probe on several ranks (runs in the target runtime; imports nothing from msmigrate).

A probe asked for ``--ranks N`` (N > 1) re-runs itself under torchrun — ``python -m torch.distributed.run
--standalone --nproc_per_node N`` on this host, gloo on CPU, the launcher's CPU patches through ``_single_rank`` —
and hands on the result line rank 0 printed. The ranks run in their own process session, killed as a group on the
timeout, so no rank outlives the probe. ``world()``, ``mean_over_ranks`` and ``full`` are what the rank code needs
to read a sharded model the way one process would.
"""
import os
import signal
import subprocess
import sys

RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "
RANK_FLAG = "--as-rank"


def world():
    """(rank, world size) of the running process group; (0, 1) without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def mean_over_ranks(value):
    """A float averaged over the ranks (the engine's ``all_reduce(AVG)`` of its logged loss); itself on one rank."""
    import torch
    import torch.distributed as dist

    if world()[1] == 1:
        return value
    t = torch.tensor([float(value)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return float(t[0]) / world()[1]


def full(tensor):
    """The whole tensor of a sharded (DTensor) one — a collective, so every rank calls it in the same order."""
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


def gather(obj):
    """Every rank's ``obj``, in rank order (a list of one on a single process)."""
    import torch.distributed as dist

    if world()[1] == 1:
        return [obj]
    out = [None] * world()[1]
    dist.all_gather_object(out, obj)
    return out


def same_draws(per_rank, samples, settings=None):
    """A problem when every rank drew the very same micro batches (their ``input_ids`` equal, step by step) from a
    dataset with at least as many samples as ranks: a data-parallel sampler gives each rank its own share, so N
    ranks on one share train N copies of it (a dataloader without the rank-splitting sampler). None otherwise, and
    where the batches carry no ids to compare. The N-rank training parity cannot see this by itself: its source
    side replays whatever the ranks drew. ``settings``: the YAML's dataloader entries, named in the problem."""
    import torch

    def ids(batch):
        value = batch.get("input_ids") if isinstance(batch, dict) else None
        return value.tolist() if isinstance(value, torch.Tensor) else None

    if len(per_rank) < 2 or not samples or samples < len(per_rank):
        return None
    first = [ids(b) for b in per_rank[0]]
    if not first or None in first or any([ids(b) for b in rank] != first for rank in per_rank[1:]):
        return None
    return (f"all {len(per_rank)} ranks drew the same {len(first)} micro batches (input ids equal step by step) from "
            f"a dataset of {samples} samples: the target's dataloader does not split the data between the "
            f"data-parallel ranks (data.dataloader_param{' ' + str(settings) if settings else ''}: a loader without "
            f"the rank-splitting sampler), so every rank trains on the same share")


def launch_ranks(script, argv, nproc, timeout):
    """Run ``script argv --as-rank`` on ``nproc`` ranks with torchrun; returns (result dict or None, torchrun argv,
    returncode, stderr tail). The result is the last result line the ranks printed (rank 0 prints it)."""
    import json

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
           "--nproc_per_node", str(nproc), os.path.abspath(script), *argv, RANK_FLAG]
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.setdefault("OMP_NUM_THREADS", "1")  # torchrun would say so on every rank; N ranks on a few cores
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, cmd, None, f"timed out after {timeout}s\n" + (err or "")[-4000:]
    lines = [ln[ln.rindex(RESULT_MARKER) + len(RESULT_MARKER):] for ln in out.splitlines() if RESULT_MARKER in ln]
    return (json.loads(lines[-1]) if lines else None), cmd, proc.returncode, (err or "")[-4000:]


def killed_by_sigkill(err: str) -> list[int]:
    """The ranks torchrun's failure table reports ended by SIGKILL (exit code -9): on a host without a limit of its
    own, the kernel's out-of-memory killer (seen: a real-scale internvl's 2-rank parity, 7.6 GB per rank)."""
    import re

    ranks = re.findall(r"rank\s*:\s*(\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*:\s*-9\b", err)
    return sorted({int(r) for r in ranks})
