"""Runs the one run loop (``Run.drive``) in a worker thread, so the session stays in control while the agent works.

The driver only adds what a live session needs through the loop's hooks: a stop flag and a queue of instructions,
both acted on at the next step boundary, where the SQLite checkpointer has just saved the state — so a stopped run
resumes exactly there (``/retry``, ``/resume``, ``msmigrate run --resume``). Gate launches run as their own process
groups (tools/runtime), so a terminal Ctrl-C does not kill them mid-step."""

from __future__ import annotations

import threading
from typing import Any, Callable

from msmigrate.agent.runner import DriveHooks, Run


class Driver:
    def __init__(self, run: Run, on_step: Callable[[str, dict[str, Any]], None] | None = None):
        self.run = run
        self._stop = threading.Event()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._instructions: list[str] = []
        self._thread: threading.Thread | None = None
        self.hooks = DriveHooks(on_step=on_step or (lambda node, update: None), stop_requested=self._stop.is_set,
                                has_instructions=lambda: bool(self._instructions),
                                take_instructions=self._take_instructions, face="chat")
        self.outcome: dict[str, Any] | None = None  # what the last drive returned (always with an exit_status)

    @property
    def busy(self) -> bool:
        # Our own flag, not Thread.is_alive(): a Ctrl-C landing inside Thread.join() can leave is_alive() wrong.
        return self._thread is not None and not self._done.is_set()

    def start(self, resume_value: Any = None) -> None:
        if self.busy:
            raise RuntimeError("a drive is already in progress")
        self._stop.clear()
        self._done.clear()
        self.outcome = None
        self._thread = threading.Thread(target=self._work, args=(resume_value,), name="msmigrate-drive", daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds; True when the drive is over (``outcome`` is set)."""
        return self._done.wait(timeout) if self._thread is not None else True

    def _work(self, resume_value: Any) -> None:
        try:  # Run.drive is the boundary that turns a bug into exit_status error: nothing escapes it
            self.outcome = self.run.drive(resume_value=resume_value, hooks=self.hooks)
        finally:
            self._done.set()

    def add_instruction(self, text: str) -> None:
        """Queue free text for the agent; the loop writes it into the state at the next step boundary."""
        with self._lock:
            self._instructions.append(text)

    def _take_instructions(self) -> list[str]:
        with self._lock:
            texts, self._instructions = self._instructions, []
        return texts

    def apply_instructions(self) -> bool:
        """Write queued instructions into the run's state now (only while no drive runs)."""
        return self.run.add_instructions(self._take_instructions())
