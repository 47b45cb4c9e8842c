"""The agent's side of the warm target runtime (the server is ``probes/_warm_server.py``; read its docstring first).

A probe costs a fresh interpreter plus ``import torch, transformers`` (seconds; far more with torch_npu + CANN). The
warm runtime pays that once per run: a server in the target runtime Python imports the heavy, edit-independent
libraries and forks one fresh child per probe, which imports the plugin and the model code anew. What stays the same
as a fresh process: the argv, cwd and environment the probe sees, its own session (a timeout kills its group), its
stdout/stderr/exit code. What is shared: only modules from the runtime's own site dirs.

One server per (runtime python, probe environment): the environment is part of the key because libraries read it
at import time (``HF_HUB_OFFLINE`` in huggingface_hub, say). Servers start lazily, are closed by ``close_all`` (the
run's ``close``) or at exit, and die on their own when this process dies (control socket EOF, parent-death signal).
A server that says its installed packages changed is restarted; one that says forking is unsafe makes the probe run
as a fresh process, and the caller records why (``Cold``)."""

from __future__ import annotations

import atexit
import concurrent.futures
import hashlib
import itertools
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SERVER_SCRIPT = Path(__file__).parent / "probes" / "_warm_server.py"
SWITCH_ENV = "MSMIGRATE_WARM_RUNTIME"  # "0" / "off": every probe runs as a fresh process
PRELOAD_ENV = "MSMIGRATE_WARM_PRELOAD"  # comma-separated module list replacing DEFAULT_PRELOAD
# Heavy, edit-independent libraries every probe needs; the model family's own modules are learned from the first
# probe that imports them (the server imports what its children imported from the site dirs, between probes).
DEFAULT_PRELOAD = ("torch", "transformers", "transformers.modeling_utils", "transformers.models.auto.modeling_auto",
                   "transformers.models.auto.processing_auto")
# Variables that change from call to call and that no library reads at import: left out of the server key (the child
# still gets the caller's exact value). pytest sets this one per test phase.
VOLATILE_ENV = frozenset({"PYTEST_CURRENT_TEST"})
MAX_SERVERS = 2  # each holds torch + transformers (~0.5 GB); the least recently used one beyond this is closed
START_TIMEOUT_S = 600.0  # importing torch_npu + CANN on a busy Ascend host can take minutes
KILL_GRACE_S = 10.0  # after asking for a kill, how long to wait for the exit line before killing directly


class Cold(Exception):
    """Run this probe as a fresh process; ``str(exc)`` says why (recorded in the probe's evidence)."""


@dataclass
class WarmOutcome:
    returncode: int | None  # None when killed on timeout
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool


def disabled_reason() -> str | None:
    """Why the warm runtime cannot be used at all here, or None."""
    if os.environ.get(SWITCH_ENV, "1").strip().lower() in ("0", "off", "false", "no", "cold"):
        return f"turned off ({SWITCH_ENV}={os.environ[SWITCH_ENV]})"
    if not hasattr(os, "fork") or not sys.platform.startswith("linux"):
        return f"no safe fork on this platform ({sys.platform})"
    return None


class _Spawner:
    """Starts servers from one long-lived thread: Linux sends the parent-death signal when the *thread* that forked
    the child ends, so a server started from a short-lived worker thread would die with that thread."""

    def __init__(self):
        self._jobs: queue.Queue = queue.Queue()
        threading.Thread(target=self._loop, name="msmigrate-warm-spawner", daemon=True).start()

    def _loop(self):
        while True:
            kwargs, future = self._jobs.get()
            try:
                future.set_result(subprocess.Popen(**kwargs))
            except BaseException as exc:  # handed to the caller, who decides
                future.set_exception(exc)

    def popen(self, **kwargs) -> subprocess.Popen:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._jobs.put((kwargs, future))
        return future.result()


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def _popen(**kwargs) -> subprocess.Popen:
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = _Spawner()
    return _spawner.popen(**kwargs)


class WarmServer:
    def __init__(self, python: str, env: dict[str, str], *, learn: bool = True, preload: tuple[str, ...] | None = None):
        self.python, self.env, self.learn = python, env, learn
        spec = os.environ.get(PRELOAD_ENV)
        self.preload = preload or (tuple(p for p in spec.split(",") if p) if spec else DEFAULT_PRELOAD)
        self.dir = Path(tempfile.mkdtemp(prefix="msm-warm-"))
        self.sock_path = str(self.dir / "s")
        self.info: dict = {}
        self.proc: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._ids = itertools.count()

    def start(self) -> None:
        """Start the server and wait until it has imported its preload list. Raises Cold when it cannot start."""
        ours, theirs = socket.socketpair()
        argv = [self.python, str(SERVER_SCRIPT), "--control-fd", str(theirs.fileno()), "--listen", self.sock_path,
                "--agent-pid", str(os.getpid()), "--preload", ",".join(self.preload)]
        if not self.learn:
            argv.append("--no-learn")
        log = open(self.dir / "server.log", "wb")
        try:
            self.proc = _popen(args=argv, env=self.env, cwd=str(self.dir), stdin=subprocess.DEVNULL, stdout=log,
                               stderr=subprocess.STDOUT, pass_fds=(theirs.fileno(),), start_new_session=True)
        except OSError as exc:
            raise Cold(f"warm runtime did not start: {exc}") from exc
        finally:
            theirs.close()
            log.close()
        self._control = ours
        ours.settimeout(START_TIMEOUT_S)
        try:
            line = ours.makefile("rb").readline()
        except OSError:
            line = b""
        if not line:
            tail = (self.dir / "server.log").read_text(errors="replace")[-2000:]
            self.close()
            raise Cold(f"warm runtime exited before it was ready: {tail.strip() or 'no output'}")
        self.info = json.loads(line)
        if self.info.get("unsafe"):
            reason = self.info["unsafe"]
            self.close()
            raise Cold(reason)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def run(self, script: str, args: list[str], cwd: str, env: dict[str, str], timeout: float) -> WarmOutcome:
        """One probe in a forked child. Raises Cold (fork unsafe, server gone) or Stale (restart and retry)."""
        n = next(self._ids)
        out, err, mods = (str(self.dir / f"{n}.{kind}") for kind in ("out", "err", "mods"))
        start = time.monotonic()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(timeout)
            try:
                conn.connect(self.sock_path)
                conn.sendall((json.dumps({"op": "run", "script": script, "args": args, "cwd": cwd, "env": env,
                                          "stdout": out, "stderr": err, "modules": mods}) + "\n").encode())
                reader = _LineReader(conn)
                first = json.loads(reader.readline() or b"{}")
            except (OSError, ValueError) as exc:
                raise Cold(f"warm runtime did not take the probe ({type(exc).__name__}: {exc})") from exc
            if "stale" in first:
                raise Stale(first["stale"])
            if "cold" in first or "pid" not in first:
                raise Cold(first.get("cold") or f"warm runtime answered {first}")
            pid, timed_out = first["pid"], False
            try:
                conn.settimeout(max(0.01, timeout - (time.monotonic() - start)))
                last = reader.readline()
            except TimeoutError:
                timed_out = True
                last = self._kill(conn, reader, pid)
            if not last:  # the server died under the probe: nothing about the probe is known
                _killpg(pid)
                raise Cold("warm runtime exited during the probe")
            code = json.loads(last).get("exit")
            return WarmOutcome(None if timed_out else code, _read_rm(out), _read_rm(err),
                               time.monotonic() - start, timed_out)
        finally:
            conn.close()
            for path in (out, err):  # the server reads and removes ``mods`` itself, after it sent the exit line
                Path(path).unlink(missing_ok=True)

    def status(self, names: list[str] | None = None) -> dict:
        """What the server holds: the modules it learned, its live children, whether ``names`` are imported in it."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(30)
            conn.connect(self.sock_path)
            conn.sendall((json.dumps({"op": "status", "names": names or []}) + "\n").encode())
            return json.loads(_LineReader(conn).readline())

    @staticmethod
    def _kill(conn: socket.socket, reader, pid: int) -> bytes:
        """Timeout: the server SIGKILLs the child's process group (it alone knows the pid is still its child)."""
        try:
            conn.settimeout(KILL_GRACE_S)
            conn.sendall(b'{"op": "kill"}\n')
            return reader.readline()
        except OSError:
            _killpg(pid)
            return b""

    def close(self) -> None:
        """Closing the control socket makes the server kill its children's groups and exit."""
        if self._control is not None:
            self._control.close()
            self._control = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _killpg(self.proc.pid)
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class _LineReader:
    """Lines from a socket that survive a recv timeout (a ``makefile`` reader is unusable after one)."""

    def __init__(self, conn: socket.socket):
        self.conn, self.buf = conn, b""

    def readline(self) -> bytes:
        while b"\n" not in self.buf:
            chunk = self.conn.recv(65536)  # TimeoutError propagates; the buffer keeps what came so far
            if not chunk:
                line, self.buf = self.buf, b""
                return line
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line + b"\n"


class Stale(Exception):
    """The server's installed packages or loaded module files changed on disk."""


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_rm(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _key(python: str, env: dict[str, str]) -> str:
    stable = sorted((k, v) for k, v in env.items() if k not in VOLATILE_ENV)
    return hashlib.sha256(json.dumps([python, stable]).encode()).hexdigest()


class WarmPool:
    """The servers of this process, one per (python, env). Thread-safe: tool calls may run in parallel."""

    def __init__(self):
        self._servers: dict[str, WarmServer] = {}
        self._cold: dict[str, str] = {}  # key -> why this runtime cannot be warm (decided once, then kept)
        self._no_learn: set[str] = set()
        self._deaths: dict[str, int] = {}
        self._lock = threading.Lock()

    def _server(self, key: str, python: str, env: dict[str, str]) -> WarmServer:
        with self._lock:  # one start per key; a concurrent probe waits for it rather than starting its own
            if key in self._cold:
                raise Cold(self._cold[key])
            server = self._servers.get(key)
            if server is not None and not server.alive():
                server.close()
                server = None
            if server is None:
                server = WarmServer(python, env, learn=key not in self._no_learn)
                try:
                    server.start()
                except Cold as exc:  # unsafe from the start, or it cannot start: fresh processes for this key
                    self._cold[key] = str(exc)
                    raise
                self._servers[key] = server
                while len(self._servers) > MAX_SERVERS:
                    oldest = next(iter(self._servers))
                    self._servers.pop(oldest).close()
            else:  # most recently used last
                self._servers[key] = self._servers.pop(key)
            return server

    def _drop(self, key: str, server: WarmServer) -> None:
        with self._lock:
            if self._servers.get(key) is server:
                del self._servers[key]
        server.close()

    def run(self, python: str, script: str, args: list[str], cwd: str, env: dict[str, str],
            timeout: float) -> tuple[WarmOutcome, dict]:
        """-> (outcome, server info). Raises Cold with the reason when the probe must run as a fresh process."""
        reason = disabled_reason()
        if reason:
            raise Cold(reason)
        key = _key(python, env)
        last = ""
        for _ in range(2):  # a stale server is replaced once; stale twice in a row means the disk keeps changing
            server = self._server(key, python, env)
            try:
                return server.run(script, args, cwd, env, timeout), server.info
            except Stale as exc:
                self._drop(key, server)
                last = str(exc)
            except Cold:
                self._drop(key, server)
                with self._lock:
                    if server.learn:  # safe at start, unsafe now: a learned import did it; the next one won't learn
                        self._no_learn.add(key)
                    self._deaths[key] = self._deaths.get(key, 0) + 1
                    if self._deaths[key] >= 3:
                        self._cold[key] = "the warm runtime failed three times in this run"
                raise
        raise Cold(f"warm runtime stale twice in a row ({last})")

    def servers(self) -> list[WarmServer]:
        with self._lock:
            return list(self._servers.values())

    def close_all(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
            self._cold.clear()
            self._no_learn.clear()
            self._deaths.clear()
        for server in servers:
            server.close()


    def forget_after_fork(self) -> None:
        """In a forked copy of this process: the servers are not its children. Drop its copies of their control
        sockets (so they still see EOF when the real owner exits) without stopping them."""
        for server in self._servers.values():
            if server._control is not None:
                server._control.close()
        self._servers, self._lock = {}, threading.Lock()


def _after_fork_in_child() -> None:
    global _spawner, _spawner_lock
    _spawner, _spawner_lock = None, threading.Lock()  # the spawner thread did not survive the fork
    POOL.forget_after_fork()


POOL = WarmPool()
atexit.register(POOL.close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
