"""The chat session: open or resume a run, drive it in the background, stream its events, ask before launches,
and answer slash commands, questions and instructions in between.

The agent works in a background thread (``Driver``) and input is read in another (``InputPump``), so the prompt
stays live while the run streams: /status, /gates, /diff, /report and questions answer at once; an instruction is
written into the run's state at the next step boundary. Ctrl-C while the agent works stops it at the next step
boundary (the run stays resumable); a second Ctrl-C leaves at once (the SQLite checkpoint is already on disk)."""

from __future__ import annotations

import os
import queue
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape

from msmigrate.faces.chat.answers import answer, is_question
from msmigrate.faces.chat.commands import COMMANDS
from msmigrate.faces.chat.driver import Driver
from msmigrate.faces.run_hook import start_run
from msmigrate.faces.chat.input_pump import CTRL_C, EOF_MARK, InputPump
from msmigrate.faces.chat.render import EventPrinter, approval_view, make_console
from msmigrate.agent.config import RunSpec, Settings, closest, launch_edit_error
from msmigrate.agent.gate_currency import stale_gates
from msmigrate.agent.nodes.verify import EDITABLE_LAUNCH_KEYS
from msmigrate.agent.runner import Run
from msmigrate.agent.state import EXIT_AWAITING_APPROVAL, EXIT_STOPPED

APPROVE_WORDS = {"approve", "a", "y", "yes", "ok", "go"}
REJECT_WORDS = {"reject", "r", "n", "no"}


def parse_edit(arg: str | list[str], current: dict[str, Any] | None = None) -> dict[str, Any] | str:
    """``key=value …`` → launch overrides (values parsed as YAML scalars), or the reason they are not valid: the
    edited launch settings must pass the same checks a spec's do (``gate_train_iters`` ≥ the gate minimum,
    ``nproc_per_node`` ≥ 1, ``nnodes`` an integer …). A line is split like a shell does (a quoted value keeps
    its spaces); a list (one ``--set`` each) is taken item by item."""
    if isinstance(arg, str):
        try:
            arg = shlex.split(arg)
        except ValueError as exc:
            return f"cannot read the edit: {exc}"
    edits: dict[str, Any] = {}
    for item in arg:
        key, sep, value = item.partition("=")
        if not sep:
            return f"expected KEY=VALUE, got {item!r}"
        if key not in EDITABLE_LAUNCH_KEYS:
            return f"{key} cannot be edited; {closest(key, EDITABLE_LAUNCH_KEYS)}"
        edits[key] = yaml.safe_load(value)
    if not edits:
        return "give at least one KEY=VALUE"
    return launch_edit_error(current or {}, edits) or edits


class ChatSession:
    def __init__(self, settings: Settings, *, console: Console | None = None, plain: bool = False,
                 approval: bool = True, policy: str | None = None, replay: Path | None = None):
        self.settings = settings
        self.console = console or make_console(highlight=False)  # ids and paths stay copyable
        self.pump = InputPump(settings.runs_dir / ".chat_history", plain, [*COMMANDS, "approve", "reject", "edit"],
                              self.prompt_text)
        self.approval, self.policy, self.replay = approval, policy, replay
        self.printer = EventPrinter(self.console)
        self.run: Run | None = None
        self.driver: Driver | None = None
        self.pending: dict[str, Any] | None = None
        self._stopping = False
        self._prompted = False
        self._sigint = False  # set by the SIGINT handler; the loop turns it into a Ctrl-C

    # ------------------------------------------------------------------------------------------------ runs
    def _attach(self, run: Run) -> None:
        if self.run is not None:
            self.run.close()
        self.run, self.pending = run, None
        self.driver = Driver(run, on_step=self._on_step)
        self.console.print(f"run [bold]{run.run_id}[/] → {run.run_dir}")

    def open_new(self, spec: RunSpec) -> None:
        update: dict[str, Any] = {"approval": self.approval}
        if self.policy:
            update["policy"] = self.policy
        if self.replay:
            update["replay_trajectory"] = self.replay.resolve()
        self._attach(start_run(self.settings, spec=spec.model_copy(update=update), on_event=self.printer))

    def open_existing(self, run_id: str) -> None:
        self._attach(start_run(self.settings, run_id=run_id, on_event=self.printer))

    def continue_run(self) -> None:
        """After opening: drive unless the run is finished or waits for an approval."""
        state = self.run.snapshot()
        self.pending = self.run.pending_interrupt()
        if self.pending:
            approval_view(self.console, self.pending)
        elif state.get("exit_status") and state.get("phase") == "done":
            self.console.print(f"run already ended: {state['exit_status']} — {escape(str(state.get('exit_detail', '')))}")
        else:
            self.drive()

    def need_run(self) -> bool:
        if self.run is None:
            self.console.print("no run open: /resume RUN_ID, or start chat with a SPEC")
        return self.run is not None

    def refuse_if_busy(self) -> bool:
        if self.driver is not None and self.driver.busy:
            self.console.print("the agent is working; wait, or Ctrl-C to stop it after the current step")
            return True
        return False

    def _on_step(self, node: str, update: dict[str, Any]) -> None:
        self.printer.phase_changed(update.get("phase") if node in ("plan", "classify", "model", "data", "config",
                                                                   "verify") else None)

    # ------------------------------------------------------------------------------------------------ driving
    def drive(self, resume_value: Any = None) -> None:
        """Start the agent in the background; the loop reports the outcome when it ends."""
        self.pending = None
        self._stopping = False
        self.driver.start(resume_value)
        self.pump.refresh()

    def _finish_drive(self) -> None:
        out, self.driver.outcome = self.driver.outcome, None
        run_id = self.run.run_id
        self.driver.apply_instructions()  # any that arrived as the drive ended
        status = out.get("exit_status")
        if status == EXIT_AWAITING_APPROVAL:
            self.pending = out["interrupt"]
            approval_view(self.console, self.pending)
        elif status == EXIT_STOPPED:
            self.console.print(f"{escape(str(out.get('exit_detail')))}. Run {run_id} is resumable: /retry here, or "
                               f"`msmigrate chat --resume {run_id}` later")
        elif out.get("error_file"):  # a bug ended the drive (not the run's own error exit)
            self.console.print(f"[red]the drive failed[/]: {escape(str(out.get('exit_detail')))} (details in "
                               f"{out['error_file']}); /retry continues from the last checkpoint")
        else:
            self.console.print(f"run {run_id} ended: [bold]{status}[/]. "
                               "/report shows the verification report; /diff the edits")
        if status != EXIT_AWAITING_APPROVAL and (out.get("artifacts") or {}).get("report"):
            self.console.print(f"report: {out['artifacts']['report']}")
        self.pump.refresh()

    def _ctrl_c(self) -> None:
        if not (self.driver and self.driver.busy):
            self.console.print("(/quit leaves; the run stays resumable)")
            return
        if self._stopping:
            self.console.print(f"left at once. Resume with: msmigrate chat --resume {self.run.run_id}")
            sys.stdout.flush()
            os._exit(130)
        self._stopping = True
        self.driver.request_stop()
        self.console.print("stopping after the current step … (Ctrl-C again to leave now; the run stays resumable)")

    def prompt_text(self) -> str:
        if self.driver is not None and self.driver.busy:
            return "(working; Ctrl-C stops) > "
        return "approve/reject/edit> " if self.pending else "msmigrate> "

    # ------------------------------------------------------------------------------------------------ input
    def _answer_approval(self, line: str) -> bool:
        """True when the line was an answer to the pending approval."""
        word, _, rest = line.strip().partition(" ")
        word = word.lower()
        if word in APPROVE_WORDS:
            self.drive({"action": "approve"})
        elif word in REJECT_WORDS:
            self.drive({"action": "reject"})
        elif word == "edit":
            edits = parse_edit(rest, self.pending.get("launch") if self.pending else None)
            if isinstance(edits, str):
                self.console.print(f"[red]{escape(edits)}[/]")
            else:
                self.drive({"action": "edit", "launch": edits})
        else:
            return False
        return True

    def handle_line(self, line: str) -> bool:
        """Act on one input line; False ends the session."""
        line = line.strip()
        if not line:
            return True
        if line.startswith("/"):
            name, _, arg = line.partition(" ")
            entry = COMMANDS.get(name.lower())
            if entry is None:
                self.console.print(f"unknown command {escape(name)}; /help lists them")
                return True
            return entry[0](self, arg)
        if self.pending and self._answer_approval(line):
            return True
        if not self.need_run():
            return True
        state = self.run.snapshot()
        if is_question(line):
            self.console.print(escape(answer(line, state, stale_gates(self.run.ctx, state))))
            return True
        self.driver.add_instruction(line)
        if not self.driver.busy:
            self.driver.apply_instructions()
        self.console.print("noted: the agent reads it at its next decision"
                           + (" (answer the approval first)" if self.pending else ""))
        return True

    def _next_input(self) -> object | None:
        """The next line/mark from the pump, or None after a short wait (so drive outcomes are noticed)."""
        if self.driver is not None and self.driver.outcome is not None and not self.driver.busy:
            self._finish_drive()
        idle = not (self.driver and self.driver.busy)
        if self.pump.plain and idle and not self._prompted:
            print(self.prompt_text(), end="", flush=True)
            self._prompted = True
        try:
            item = None if self._sigint else self.pump.lines.get(timeout=0.2)
        except queue.Empty:
            item = None
        except KeyboardInterrupt:  # plain mode: the terminal's SIGINT lands in the main thread
            return CTRL_C
        if item is None and self._sigint:
            self._sigint = False
            return CTRL_C
        return item

    def loop(self) -> None:
        self.pump.start()
        # plain mode: the terminal's SIGINT becomes a Ctrl-C the loop itself acts on, instead of a KeyboardInterrupt
        # raised wherever the main thread happens to be (one CI run of the Ctrl-C test lost it that way). The handler
        # only sets a flag: it runs in the main thread between bytecodes, possibly while that thread holds the input
        # queue's lock inside get(), and a put() there would wait on that lock for ever (the likely cause of a later
        # CI run's hang: ^C echoed, then nothing for 90 s)
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGINT, lambda signum, frame: setattr(self, "_sigint", True))
        try:
            with self.pump.stdout_guard():
                while True:
                    try:
                        item = self._next_input()
                        if item is None:
                            continue
                        self._prompted = False
                        if item is CTRL_C:
                            self._ctrl_c()
                            continue
                        if item is EOF_MARK or not self.handle_line(str(item)):
                            break
                        self.pump.refresh()
                    except KeyboardInterrupt:  # plain mode: SIGINT may land anywhere in the main thread
                        self._ctrl_c()
        finally:
            if previous is not None:  # Ctrl-C while waiting for the step below leaves at once, as before
                signal.signal(signal.SIGINT, previous)
            if self.driver is not None and self.driver.busy:
                self.driver.request_stop()
                self.console.print("waiting for the current step to end …")
                while not self.driver.join(0.5):
                    pass
            if self.run is not None:
                self.console.print(f"bye. Run {self.run.run_id} is saved in {self.run.run_dir}; "
                                   f"continue with: msmigrate chat --resume {self.run.run_id}")
                self.run.close()
