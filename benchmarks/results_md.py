"""Each benchmark script's own section of ``benchmarks/RESULTS.md``, rewritten by the script when it runs.

A script's ``__main__`` block runs its ``main`` inside ``recorded(name)``: what ``main`` prints still goes to stdout,
and when it returns, the text between the section's two markers in RESULTS.md is replaced by that output, with the
date, the commit, the command line and the machine's load. The rest of the file (the hand-written measurement
history) is left as it is; a section not there yet is appended. ``MSMIGRATE_RESULTS_MD`` names another file, or
``0`` to write nothing (a run that should not touch the checkout)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def begin_marker(name: str) -> str:
    return f"<!-- BEGIN {name} (rewritten by benchmarks/{name}.py; edit the history below, not this) -->"


def end_marker(name: str) -> str:
    return f"<!-- END {name} -->"


def update_section(text: str, name: str, body: str) -> str:
    """``text`` with the section ``name`` holding ``body`` (appended when the markers are absent)."""
    begin, end = begin_marker(name), end_marker(name)
    block = f"{begin}\n{body.rstrip()}\n{end}"
    start = text.find(begin)
    stop = text.find(end, start + len(begin)) if start >= 0 else -1
    if start < 0 or stop < 0:
        return text.rstrip("\n") + f"\n\n{block}\n"
    return text[:start] + block + text[stop + len(end):]


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=RESULTS.parent, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def section_body(name: str, argv: list[str], output: str, seconds: float) -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    command = " ".join(["python", f"benchmarks/{name}.py", *argv])
    return (f"Last run {when} at commit `{_commit()}`: `{command}` ({seconds:.0f} s; load average {load} on "
            f"{os.cpu_count()} cores)\n\n```text\n{output.rstrip()}\n```")


class _Tee(io.TextIOBase):
    def __init__(self, stream) -> None:
        self.stream, self.buffer_ = stream, io.StringIO()

    def write(self, s: str) -> int:
        self.stream.write(s)
        self.buffer_.write(s)
        return len(s)

    def flush(self) -> None:
        self.stream.flush()


@contextlib.contextmanager
def recorded(name: str, argv: list[str] | None = None) -> Iterator[None]:
    """Run the block with stdout teed; on a normal end, write what it printed into RESULTS.md's section ``name``."""
    target = os.environ.get("MSMIGRATE_RESULTS_MD", str(RESULTS))
    tee = _Tee(sys.stdout)
    started = time.time()
    with contextlib.redirect_stdout(tee):
        yield
    if target == "0" or not tee.buffer_.getvalue().strip():
        return
    path = Path(target)
    text = path.read_text(encoding="utf-8") if path.is_file() else "# Benchmark results\n"
    body = section_body(name, list(sys.argv[1:] if argv is None else argv), tee.buffer_.getvalue(),
                        time.time() - started)
    path.write_text(update_section(text, name, body), encoding="utf-8")
    print(f"results: section {name} of {path} rewritten", file=sys.stderr)
