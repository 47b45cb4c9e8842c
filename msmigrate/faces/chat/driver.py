"""Drives a run in a worker thread, one graph super-step at a time, so the session stays in control.

Stopping is cooperative: a stop request takes effect at the next step boundary, where the SQLite checkpointer has
just saved the state — so a stopped run resumes exactly there (``/retry``, ``/resume``, ``msmigrate run --resume``).
Gate launches run as their own process groups (tools/runtime), so a terminal Ctrl-C does not kill them mid-step."""

from __future__ import annotations

import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from langgraph.types import Command

from msmigrate.agent.runner import Run
from msmigrate.core.secret_mask import mask_text


@dataclass
class DriveOutcome:
    kind: str  # "finished" | "interrupt" | "stopped" | "error"
    state: dict[str, Any] = field(default_factory=dict)
    interrupt: dict[str, Any] | None = None
    error: str = ""


class Driver:
    def __init__(self, run: Run, on_step: Callable[[str, dict[str, Any]], None] | None = None):
        self.run = run
        self.on_step = on_step or (lambda node, update: None)
        self._stop = threading.Event()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._instructions: list[str] = []
        self._thread: threading.Thread | None = None
        self.outcome: DriveOutcome | None = None

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
        try:
            self._drive(resume_value)
        finally:
            self._done.set()

    def add_instruction(self, text: str) -> None:
        """Queue free text for the agent; the worker writes it into the state at the next step boundary."""
        with self._lock:
            self._instructions.append(text)

    def apply_instructions(self) -> bool:
        """Write queued instructions into the run's state (only while no drive runs, or from the worker itself)."""
        with self._lock:
            texts, self._instructions = self._instructions, []
        if not texts:
            return False
        run = self.run
        current = run.snapshot().get("instructions", "")
        run.graph.update_state(run.config, {"instructions": "\n".join(t for t in (current, *texts) if t)})
        for text in texts:
            run.trajectory.append("instruction", text=text)
        return True

    def _drive(self, resume_value: Any) -> None:
        run = self.run
        started = bool(run.graph.get_state(run.config).values)
        if resume_value is not None:
            inp: Any = Command(resume=resume_value)
        else:
            inp = None if started else run.initial_state()
        run.trajectory.append("drive", resumed=started, face="chat")
        if started and resume_value is None:
            run.answer_crashed_calls()  # as Run.drive: a call that crashed the last drive is not replayed blindly
        try:
            while True:
                paused = False
                for chunk in run.graph.stream(inp, run.config, stream_mode="updates"):
                    for node, update in chunk.items():
                        if not node.startswith("__"):
                            self.on_step(node, update if isinstance(update, dict) else {})
                    if self._stop.is_set():
                        run.trajectory.append("stopped", by="user")
                        self.outcome = DriveOutcome("stopped", run.snapshot())
                        return
                    if self._instructions and not run.pending_interrupt():
                        paused = True  # leave the stream at this step boundary to write the instruction
                        break
                if not paused:
                    break
                self.apply_instructions()
                inp = None  # continue from the checkpoint just written
        except Exception as exc:  # boundary (as Run.drive): a bug ends this drive with a message, not the session
            tb = mask_text(traceback.format_exc())
            run.trajectory.append("error", error=repr(exc), traceback=tb)
            (run.run_dir / "error.txt").write_text(tb)
            self.outcome = DriveOutcome("error", run.snapshot(), error=mask_text(f"{type(exc).__name__}: {exc}"))
            return
        payload = run.pending_interrupt()
        if payload is None:
            run.release_worktree()  # the run ended: its branch can be checked out; /undo re-creates the worktree
        state = run.snapshot()
        self.outcome = DriveOutcome("interrupt", state, interrupt=payload) if payload else DriveOutcome("finished", state)
