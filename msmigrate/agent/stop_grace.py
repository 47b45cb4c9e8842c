"""A user's stop reaching a scheduler job: the job gets a grace period to end by itself, then it is cancelled.

The verify gates stop between launches (``nodes/work.run_gates``), but a Slurm job of the running gate may hold
nodes for hours: left alone it runs on after the user said stop, killed at once it loses a nearly finished step.
The launcher's follow loop asks its cancel event at every poll (``tools/launcher/slurm_run``); this object answers
"not yet" until the stop is ``grace_s`` old, and tells the user when the job will be cancelled."""

from __future__ import annotations

import time
from typing import Any, Callable


class StopGrace:
    """Duck-typed ``threading.Event`` for ``launch(cancel=…)``: set ``grace_s`` seconds after the stop request."""

    def __init__(self, stop_requested: Callable[[], bool], grace_s: float, emit: Callable[..., Any], label: str,
                 clock: Callable[[], float] = time.monotonic):
        self.stop_requested, self.grace_s, self.emit = stop_requested, grace_s, emit
        self.label, self.clock = label, clock
        self.since: float | None = None

    def is_set(self) -> bool:
        if not self.stop_requested():
            return False
        now = self.clock()
        if self.since is None:
            self.since = now
            self.emit("stop_grace", label=self.label, grace_s=self.grace_s,
                      detail=f"stop requested: the Slurm job of {self.label} is cancelled in {self.grace_s:.0f} s "
                             "unless it ends first; nothing more is launched after it")
        return now - self.since >= self.grace_s
