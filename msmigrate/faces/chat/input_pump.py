"""Reads the user's lines in a background thread so the session can act on them while the agent works.

Plain mode (pipes, ``TERM=dumb``, ``--plain``): ``sys.stdin.readline``; the session prints its own prompt when it is
idle, and Ctrl-C is the terminal's SIGINT in the main thread. Terminal mode: a prompt_toolkit prompt (history file,
slash-command completion) that stays at the bottom while events scroll above it (``patch_stdout``); Ctrl-C there is a
key press, delivered as ``CTRL_C``."""

from __future__ import annotations

import os
import queue
import sys
import threading
from contextlib import nullcontext
from pathlib import Path
from typing import Callable

EOF_MARK = object()
CTRL_C = object()


class InputPump:
    def __init__(self, history_file: Path, plain: bool, words: list[str], prompt_text: Callable[[], str]):
        self.lines: "queue.Queue[object]" = queue.Queue()
        self.session = None
        self.prompt_text = prompt_text
        if not plain and sys.stdin.isatty() and os.environ.get("TERM", "dumb") != "dumb":
            from prompt_toolkit import PromptSession
            from prompt_toolkit.completion import WordCompleter
            from prompt_toolkit.history import FileHistory

            history_file.parent.mkdir(parents=True, exist_ok=True)
            self.session = PromptSession(history=FileHistory(str(history_file)),
                                         completer=WordCompleter(words, sentence=True))
        self._thread = threading.Thread(target=self._read, name="msmigrate-input", daemon=True)

    @property
    def plain(self) -> bool:
        return self.session is None

    def start(self) -> None:
        self._thread.start()

    def stdout_guard(self):
        """Keeps the prompt_toolkit prompt intact while other threads print."""
        if self.session is None:
            return nullcontext()
        from prompt_toolkit.patch_stdout import patch_stdout

        return patch_stdout(raw=True)

    def refresh(self) -> None:
        """Redraw the prompt (its text follows the session state)."""
        app = getattr(self.session, "app", None)
        if app is not None and app.is_running:
            app.invalidate()

    def _read(self) -> None:
        while True:
            try:
                if self.session is not None:
                    line = self.session.prompt(lambda: self.prompt_text())
                else:
                    line = sys.stdin.readline()
                    if line == "":
                        raise EOFError
            except EOFError:
                self.lines.put(EOF_MARK)
                return
            except KeyboardInterrupt:
                self.lines.put(CTRL_C)
                continue
            self.lines.put(line.rstrip("\n"))
