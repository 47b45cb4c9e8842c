"""Output that is not a terminal is never wrapped: whatever COLUMNS says, a path, a JSON line and a table row
come out whole (CI logs, pipes, files)."""

import os
import subprocess
import sys

import pytest

LONG_PATH = "/tmp/" + "/".join(f"segment_{i:02d}" for i in range(20)) + "/summary.json"

SCRIPT = f"""
from rich.table import Table
from msmigrate.faces.chat.render import make_console
c = make_console(stderr=True)
c.print("summary: {LONG_PATH}")
t = Table(title="batch")
t.add_column("item"); t.add_column("exit")
t.add_row("{LONG_PATH}", "precheck_failed")
c.print(t)
"""


@pytest.mark.parametrize("columns", [None, "40", "300"])
def test_non_terminal_output_is_never_wrapped(columns):
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE")}
    if columns:
        env["COLUMNS"] = columns
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert f"summary: {LONG_PATH}" in lines
    row = [ln for ln in lines if LONG_PATH in ln and "precheck_failed" in ln]
    assert len(row) == 1, out.stderr  # the table row is one line, not folded cell by cell


def test_usage_error_is_one_plain_line_in_a_pipe():
    env = {**os.environ, "COLUMNS": "40"}
    out = subprocess.run([sys.executable, "-m", "msmigrate.faces.cli", "run", "--no-such-option-at-all-here"],
                         env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 2
    assert "No such option: --no-such-option-at-all-here" in out.stderr.splitlines()[-1], out.stderr


@pytest.mark.parametrize("command", [["run"], ["batch"]])
def test_help_in_a_pipe_is_not_folded(command):
    """`--help` piped to a file or a CI log keeps each paragraph and each option row on one line (click would fold
    them at 80 columns when it cannot see a terminal)."""
    env = {**os.environ, "COLUMNS": "40"}
    out = subprocess.run([sys.executable, "-m", "msmigrate.faces.cli", *command, "--help"], env=env,
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    summary = [ln for ln in lines if ln.startswith("  ") and not ln.lstrip().startswith("-")][0]
    assert len(summary) > 80, out.stdout  # the one-paragraph summary is one line
