"""Small things users expect of the command line: --version, --set KEY=VALUE in --help (a value with spaces kept
whole), needs_accelerator's own exit code, and Ctrl-C of a headless run printing the exact resume command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import typer

from msmigrate.faces import cli
from msmigrate.faces.chat.session import parse_edit


def msmigrate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msmigrate.faces.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"}, timeout=120)


def test_version_and_set_help():
    from importlib.metadata import version

    out = msmigrate("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"msmigrate {version('msmigrate')}"
    helptext = msmigrate("run", "--help").stdout
    assert "--set KEY=VALUE" in helptext and "4 needs_accelerator" in " ".join(helptext.split())


def test_a_set_value_with_spaces_stays_whole():
    """One --set is one KEY=VALUE: the value reaches the launch checks whole (here refused by them, naming the whole
    value) instead of being split into a second, bogus KEY=VALUE."""
    refused = parse_edit(["slurm.constraint=fast nodes"], {})
    assert "constraint 'fast nodes' is not valid" in refused
    assert "constraint 'fast nodes' is not valid" in parse_edit('slurm.constraint="fast nodes"', {})  # chat: quoted
    assert parse_edit(["slurm.constraint=fast&big", "nproc_per_node=2"], {}) == {
        "slurm.constraint": "fast&big", "nproc_per_node": 2}
    with pytest.raises(typer.Exit):  # the CLI says why, as one line
        cli._answer(False, False, ["slurm.constraint=fast nodes"], {"launch": {}})


class FakeRun:
    def __init__(self, tmp_path: Path, state: dict | None = None, interrupt: bool = False):
        self.run_id, self.run_dir = "m-20260101-000000-abcd", tmp_path / "runs" / "m"
        self.settings = SimpleNamespace(runs_dir=tmp_path / "my runs")
        self.spec = SimpleNamespace(approval=False)
        self._state, self._interrupt, self.closed = state, interrupt, False

    def drive(self, approver=None, resume_value=None):
        if self._interrupt:
            raise KeyboardInterrupt
        return self._state

    def close(self):
        self.closed = True


@pytest.mark.parametrize("status, code", [("success", 0), ("needs_accelerator", 4), ("gates_failed", 1),
                                          ("error", 1)])
def test_exit_codes(tmp_path, status, code):
    with pytest.raises(typer.Exit) as exc:
        cli._drive_headless(FakeRun(tmp_path, {"run_id": "m", "exit_status": status, "gates": {}}))
    assert exc.value.exit_code == code


def test_ctrl_c_prints_the_exact_resume_command(tmp_path, capsys):
    run = FakeRun(tmp_path, interrupt=True)
    with pytest.raises(typer.Exit) as exc:
        cli._drive_headless(run)
    assert exc.value.exit_code == 130 and run.closed
    err = " ".join(capsys.readouterr().err.split())
    assert f"msmigrate run --resume {run.run_id} --runs-dir '{tmp_path / 'my runs'}'" in err
    assert "--approve" not in err
