"""What a trial is doing between ``started`` and its verdict: its phase and each gate's result as they happen, read
from the run's trajectory (the batch's reader), so any run function — in process or not — is followed the same way."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from msmigrate.faces.batch.progress import item_progress

POLL_S = 2.0


class TrialWatch:
    """``start`` a trial's watch, ``stop`` it at the verdict; ``say`` gets one line per change."""

    def __init__(self, say: Callable[[str], None], poll_s: float = POLL_S):
        self.say, self.poll_s = say, poll_s
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.label, self.trajectory = "", Path()
        self._phase, self._seen = "", set()

    def poll(self) -> list[str]:
        """The changes since the last poll, as lines (phase entered, gate passed or failed)."""
        prog = item_progress(self.trajectory)
        lines = []
        phase = prog.get("phase", "")
        if phase and phase != self._phase:
            self._phase = phase
            lines.append(f"{self.label}: phase {phase}")
        for gate, mark in [*((g, "PASS") for g in prog.get("gates", [])), *((g, "FAIL") for g in prog.get("failed", []))]:
            if (gate, mark) not in self._seen:
                self._seen.add((gate, mark))
                lines.append(f"{self.label}: gate {gate} {mark}")
        return lines

    def event(self, kind: str, data: dict) -> None:
        """The run's own progress events (a run in this process): a gate is named when it starts, so a launch
        that takes minutes shows which gate it is; results still come from the trajectory."""
        if kind == "gate_start" and self._thread is not None:
            self.say(f"{self.label}: gate {data.get('gate')} running")

    def start(self, label: str, run_dir: Path) -> None:
        self.stop()
        self.label, self.trajectory = label, Path(run_dir) / "trajectory.jsonl"
        self._phase, self._seen = "", set()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="eval-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        for line in self.poll():  # what happened since the last poll, before the verdict line
            self.say(line)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            for line in self.poll():
                self.say(line)
