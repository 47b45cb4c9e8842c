"""The chat session: open or resume a run, drive it in the background, stream its events, ask before launches,
and answer slash commands, questions and instructions in between.

Input comes from prompt_toolkit (history + slash-command completion) on a terminal, from ``input()`` otherwise
(pipes, ``TERM=dumb``, ``--plain``). Ctrl-C while the agent works stops it at the next step boundary (the run stays
resumable); a second Ctrl-C leaves at once (the SQLite checkpoint is already on disk)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape

from msmigrate.agent.chat.answers import answer, is_question
from msmigrate.agent.chat.commands import COMMANDS
from msmigrate.agent.chat.driver import Driver
from msmigrate.agent.chat.hook import run_overrides
from msmigrate.agent.chat.render import EventPrinter, approval_view
from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.nodes.verify import EDITABLE_LAUNCH_KEYS
from msmigrate.agent.runner import Run, new_run_id

APPROVE_WORDS = {"approve", "a", "y", "yes", "ok", "go"}
REJECT_WORDS = {"reject", "r", "n", "no"}


class LineReader:
    def __init__(self, history_file: Path, plain: bool):
        self.session = None
        if not plain and sys.stdin.isatty() and os.environ.get("TERM", "") != "dumb":
            from prompt_toolkit import PromptSession
            from prompt_toolkit.completion import WordCompleter
            from prompt_toolkit.history import FileHistory

            history_file.parent.mkdir(parents=True, exist_ok=True)
            words = [*COMMANDS, "approve", "reject", "edit"]
            self.session = PromptSession(history=FileHistory(str(history_file)),
                                         completer=WordCompleter(words, sentence=True))

    def read(self, prompt: str) -> str | None:
        """One line, or None at end of input."""
        try:
            if self.session is not None:
                return self.session.prompt(prompt)
            return input(prompt)
        except EOFError:
            return None


def parse_edit(arg: str) -> dict[str, Any] | str:
    """``key=value …`` → launch overrides (values parsed as YAML scalars), or the reason it is not valid."""
    edits: dict[str, Any] = {}
    for item in arg.split():
        key, sep, value = item.partition("=")
        if not sep:
            return f"expected KEY=VALUE, got {item!r}"
        if key not in EDITABLE_LAUNCH_KEYS:
            return f"{key} cannot be edited; editable: {', '.join(sorted(EDITABLE_LAUNCH_KEYS))}"
        edits[key] = yaml.safe_load(value)
    return edits or "give at least one KEY=VALUE"


class ChatSession:
    def __init__(self, settings: Settings, *, console: Console | None = None, plain: bool = False,
                 approval: bool = True, policy: str | None = None, replay: Path | None = None):
        self.settings = settings
        self.console = console or Console(highlight=False, soft_wrap=True)  # ids and paths stay copyable
        self.reader = LineReader(settings.runs_dir / ".chat_history", plain)
        self.approval, self.policy, self.replay = approval, policy, replay
        self.printer = EventPrinter(self.console)
        self.run: Run | None = None
        self.driver: Driver | None = None
        self.pending: dict[str, Any] | None = None

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
        spec = spec.model_copy(update=update)
        run_id = new_run_id(spec.model_name)
        self._attach(Run(spec, run_id, self.settings, on_event=self.printer,
                         **run_overrides(spec, run_id, self.settings)))

    def open_existing(self, run_id: str) -> None:
        spec_file = self.settings.runs_dir / run_id / "spec.yaml"
        if not spec_file.is_file():
            raise FileNotFoundError(f"no run {run_id} under {self.settings.runs_dir}")
        spec = RunSpec.model_validate(yaml.safe_load(spec_file.read_text()))
        self._attach(Run.resume(run_id, self.settings, on_event=self.printer,
                                **run_overrides(spec, run_id, self.settings)))

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
        self.pending = None
        self.driver.start(resume_value)
        self._wait()
        out = self.driver.outcome
        run_id = self.run.run_id
        if out is None:
            return
        if out.kind == "interrupt":
            self.pending = out.interrupt
            approval_view(self.console, out.interrupt)
        elif out.kind == "finished":
            self.console.print(f"run {run_id} ended: [bold]{out.state.get('exit_status')}[/]. "
                               "/report shows the verification report; /diff the edits")
        elif out.kind == "stopped":
            self.console.print(f"stopped at a step boundary (phase {out.state.get('phase')}). Run {run_id} is "
                               f"resumable: /retry here, or `msmigrate chat --resume {run_id}` later")
        else:
            self.console.print(f"[red]the drive failed[/]: {escape(out.error)} (details in {self.run.run_dir}/error.txt); "
                               "/retry continues from the last checkpoint")

    def _wait(self) -> None:
        stopping = False
        while True:
            try:
                if self.driver.join(0.2):
                    return
            except KeyboardInterrupt:
                if stopping:
                    self.console.print(f"left at once. Resume with: msmigrate chat --resume {self.run.run_id}")
                    sys.stdout.flush()
                    os._exit(130)
                stopping = True
                self.driver.request_stop()
                self.console.print("stopping after the current step … (Ctrl-C again to leave now; the run stays "
                                   "resumable)")

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
            edits = parse_edit(rest)
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
            self.console.print(escape(answer(line, state)))
            return True
        text = "\n".join(t for t in (state.get("instructions", ""), line) if t)
        self.run.graph.update_state(self.run.config, {"instructions": text})
        self.run.trajectory.append("instruction", text=line)
        self.console.print("noted: the agent reads it at its next decision"
                           + (" (answer the approval first)" if self.pending else ""))
        return True

    def loop(self) -> None:
        try:
            while True:
                prompt = "approve/reject/edit> " if self.pending else "msmigrate> "
                try:
                    line = self.reader.read(prompt)
                except KeyboardInterrupt:
                    self.console.print("(/quit leaves; the run stays resumable)")
                    continue
                if line is None or not self.handle_line(line):
                    break
        finally:
            if self.run is not None:
                self.console.print(f"bye. Run {self.run.run_id} is saved in {self.run.run_dir}; "
                                   f"continue with: msmigrate chat --resume {self.run.run_id}")
                self.run.close()
