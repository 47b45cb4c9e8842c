"""What a Megatron training log says about the iterations it ran: the per-iteration loss lines that Megatron's
``training_log`` prints (``iteration  N/  M | ... | loss: 6.27E+00 | ...``, MM's pretrain_vlm.py names it ``loss``,
GPT's ``lm loss``), and the verdict of a short training run on them.

``training_verdict`` passes only on what the log shows: one loss line per wanted iteration, every loss finite, the
last loss below the first (a run whose loss stays flat or rises has not shown that it learns), and Megatron's own
counters of skipped / NaN iterations at zero. Kept apart from the launch so it is tested on recorded real logs.
"""

from __future__ import annotations

import math
import re

ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
LOSS = re.compile(r"\|\s*(?:lm )?loss:\s*([-+0-9.eEnaNinf]+)\s*\|")
NAN_ITERS = re.compile(r"number of nan iterations:\s*(\d+)")
SKIPPED_ITERS = re.compile(r"number of skipped iterations:\s*(\d+)")
LOADED = re.compile(r"successfully loaded checkpoint from (\S+)")


def loaded_from(log: str) -> list[str]:
    """The checkpoint folders Megatron's ``load_checkpoint`` says it loaded (one line per run, rank 0)."""
    return LOADED.findall(log)


def iteration_losses(log: str) -> list[tuple[int, int, float]]:
    """(iteration, of, loss) per Megatron iteration line with a loss, in log order."""
    out = []
    for line in log.splitlines():
        it, loss = ITERATION.search(line), LOSS.search(line)
        if it and loss:
            out.append((int(it.group(1)), int(it.group(2)), float(loss.group(1))))
    return out


def training_verdict(log: str, want_iters: int | None) -> tuple[list[tuple[int, float]], list[str]]:
    """([(iteration, loss)], problems) of a short training run's log; no problems means it learned on evidence."""
    losses = [(i, v) for i, _, v in iteration_losses(log)]
    problems = []
    seen = len({i for i, _ in losses})
    if not losses:
        return [], ["no Megatron iteration line with a loss in the log"]
    if want_iters is not None and seen != want_iters:
        problems.append(f"{seen} iteration line(s) with a loss, --train-iters is {want_iters}")
    bad = [i for i, v in losses if not math.isfinite(v)]
    if bad:
        problems.append(f"non-finite loss at iteration(s) {bad[:5]}")
    counted = [int(n) for line in log.splitlines() if ITERATION.search(line)
               for n in NAN_ITERS.findall(line) + SKIPPED_ITERS.findall(line)]
    if any(counted):
        problems.append(f"Megatron counted skipped/NaN iterations: {max(counted)}")
    if not bad:
        if len(losses) < 2:
            problems.append("one iteration's loss: a fall needs two")
        elif not losses[-1][1] < losses[0][1]:
            problems.append(f"the loss did not fall: {losses[0][1]:.6g} at iteration {losses[0][0]} -> "
                            f"{losses[-1][1]:.6g} at iteration {losses[-1][0]}")
    return losses, problems
