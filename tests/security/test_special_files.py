"""Special files at editable paths: a FIFO, a socket or a device (code that ran in the work tree can plant one) is
refused at once — never opened for a blocking read while the writer holds the git lock — and a tool call that
still hangs ends at its wall-clock bound as an error observation."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import threading
import time
from contextlib import contextmanager

import pytest
from pydantic import BaseModel

from msmigrate.core.tool_result import ToolResult, make_tool
from msmigrate.tools import safe_fs
from msmigrate.tools.file_writer import edit_file, write_file
from msmigrate.tools.repo_reader.files import grep, read_lines

M = "mindspeed_mm/fsdp/models/tiny"


@contextmanager
def at_most(seconds: int):
    """Fail (instead of hanging the suite) when the block blocks."""
    def on_alarm(signum, frame):
        raise TimeoutError(f"blocked for more than {seconds}s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def plant(kind: str, path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        here = os.getcwd()
        os.chdir(path.parent)  # bound by its short relative name: AF_UNIX paths are limited to ~107 bytes
        try:
            s = socket.socket(socket.AF_UNIX)
            s.bind(path.name)
            s.close()
        finally:
            os.chdir(here)
    elif kind == "chardev":
        try:
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
        except PermissionError:
            pytest.skip("no CAP_MKNOD here")


@pytest.mark.parametrize("kind", ["fifo", "socket", "chardev"])
@pytest.mark.parametrize("rel", [f"{M}/modeling_tiny.py", "examples/tiny/tiny_config.yaml"])
def test_special_file_at_an_editable_path_is_refused_without_blocking(ctx, kind, rel):
    plant(kind, ctx.target / rel)
    with at_most(10):
        wrote = write_file(ctx, rel, "x = 1\n" if rel.endswith(".py") else "a: 1\n")
        edited = edit_file(ctx, rel, "x", "y")
    for res in (wrote, edited):
        assert not res.ok and "regular file" in res.error, res.error
    assert not stat.S_ISREG(os.lstat(ctx.target / rel).st_mode)  # left as it was, not replaced


def test_special_file_as_a_directory_component_is_refused(ctx):
    plant("fifo", ctx.target / M)
    with at_most(10):
        res = write_file(ctx, f"{M}/modeling_tiny.py", "x = 1\n")
    assert not res.ok


def test_safe_fs_refuses_a_fifo_swapped_in_after_the_check(ctx, monkeypatch):
    """The lstat check and the open race: the open itself is non-blocking and fstat-checked."""
    rel = f"{M}/modeling_tiny.py"
    plant("fifo", ctx.target / rel)
    monkeypatch.setattr(safe_fs, "_refuse_special", lambda dfd, name, r: True)  # as if it was a file at the check
    with at_most(10), pytest.raises(safe_fs.UnsafePath, match="FIFO"):
        safe_fs.read_text(ctx.target, rel)


def test_safe_fs_reads_and_writes_regular_files_as_before(tmp_path):
    safe_fs.write_text(tmp_path, "a/b.txt", "hello")
    assert safe_fs.read_text(tmp_path, "a/b.txt") == "hello" and safe_fs.read_text(tmp_path, "a/c.txt") is None
    safe_fs.write_text(tmp_path, "a/b.txt", "again")
    assert (tmp_path / "a" / "b.txt").read_text() == "again"


def test_reader_tools_skip_a_fifo(tmp_path):
    (tmp_path / "code.py").write_text("needle = 1\n")
    os.mkfifo(tmp_path / "pipe.py")
    with at_most(10):
        assert not read_lines(tmp_path, "pipe.py").ok
        found = grep(tmp_path, "needle")
    assert found.ok and "code.py" in json.dumps(found.data)


class NoArgs(BaseModel):
    pass


def test_a_tool_call_past_its_bound_is_an_error_observation():
    release = threading.Event()
    tool = make_tool("slow", "sleeps", NoArgs, lambda: (release.wait(30), ToolResult.success())[1], timeout_s=0.5)
    started = time.monotonic()
    out = json.loads(tool.invoke({}))
    release.set()
    assert time.monotonic() - started < 5
    assert out["ok"] is False and out["data"]["timed_out"] is True and "did not finish within" in out["error"]


def test_the_bound_keeps_results_exceptions_and_control_flow():
    from langgraph.errors import GraphInterrupt

    ok = make_tool("fast", "", NoArgs, lambda: ToolResult.success(v=1), timeout_s=5)
    assert json.loads(ok.invoke({}))["data"] == {"v": 1}

    def boom():
        raise OSError("disk")

    out = json.loads(make_tool("boom", "", NoArgs, boom, timeout_s=5).invoke({}))
    assert out["ok"] is False and out["data"]["exception"] == "OSError"

    def pause():
        raise GraphInterrupt(())

    with pytest.raises(GraphInterrupt):
        make_tool("ask", "", NoArgs, pause, timeout_s=5).invoke({})
    bound = make_tool("per-call", "", NoArgs, lambda: ToolResult.success(), timeout_s=lambda kw: 7.0)
    assert json.loads(bound.invoke({}))["ok"] is True
