"""The warm target runtime (runs IN the target runtime; imports nothing from msmigrate, and never the target's code).

    python _warm_server.py --control-fd N --listen <unix socket path> --agent-pid P [--preload torch,transformers]
                           [--no-learn]

It imports the heavy, edit-independent libraries once (torch, transformers, ... from the runtime's own site dirs),
then forks one fresh child per probe: the child starts its own session (so a timeout kills its whole group), takes
the probe's cwd/env/argv, imports the plugin and model code anew, runs the probe script as ``__main__`` and exits.
The parent never imports plugin, target, source or probe code.

Protocol (one JSON line each way, over a new connection to ``--listen`` per probe):
  -> {"op": "run", "script", "args", "cwd", "env", "stdout", "stderr", "modules"}   (paths the child writes to)
  <- {"pid": child} then {"exit": returncode}            | {"cold": reason}  (fork unsafe: run it fresh instead)
                                                          | {"stale": what}  (installed packages changed: restart me)
  -> {"op": "kill"}  (the client's timeout: SIGKILL the child's process group; the exit line follows)
  -> {"op": "status", "names": [...]}  <- {"learned", "children", "loaded": {name: bool}}
A client that disconnects mid-probe gets its child's group killed.

Lifetime: a parent-death signal, a check of the agent's pid, and EOF on the control socket (the agent's end closes
when the agent exits or dies) each make the server kill every child group and exit — it never outlives the run.

Fork safety: before each fork the server checks that no device runtime is initialised in it (torch.cuda /
torch.npu ``is_initialized``) and that it runs no Python thread but the main one; otherwise it answers ``cold`` with
the reason. Staleness: the files of every module it loaded (mtime, size) and the dist-info / .pth entries of its site
dirs are snapshotted; any change answers ``stale`` (a pip install, an upgrade, an edited editable install).

Learning: a child reports the modules it imported from the runtime's site dirs (never from the target, the source,
the probe's own folder or the HF dynamic-module cache); the parent imports those between probes, so the second
probe of a kind finds the model family's transformers modules warm too.
"""
import argparse
import atexit
import ctypes
import importlib
import json
import os
import runpy
import select
import signal
import site
import socket
import sys
import sysconfig
import threading
import time
import traceback

SITE_SUFFIXES = (".dist-info", ".egg-info", ".pth", ".egg-link")


def site_dirs():
    dirs = set(site.getsitepackages()) if hasattr(site, "getsitepackages") else set()
    if site.ENABLE_USER_SITE and hasattr(site, "getusersitepackages"):
        dirs.add(site.getusersitepackages())
    for key in ("purelib", "platlib", "stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(path)
    return sorted(os.path.realpath(d) for d in dirs if os.path.isdir(d))


class Snapshot:
    """What the parent's code is made of: module files and installed distributions, to detect a change on disk."""

    def __init__(self, dirs):
        self.dirs = dirs
        self.files = self._module_files()
        self.stats = {path: self._stat(path) for path in self.files}
        self.dists = self._dists()

    @staticmethod
    def _stat(path):
        try:
            st = os.stat(path)
            return st.st_mtime_ns, st.st_size
        except OSError:
            return None

    @staticmethod
    def _module_files():
        return sorted({m.__file__ for m in list(sys.modules.values()) if isinstance(getattr(m, "__file__", None), str)})

    def _dists(self):
        found = {}
        for d in self.dirs:
            try:
                names = sorted(n for n in os.listdir(d) if n.endswith(SITE_SUFFIXES))
            except OSError:
                continue
            found[d] = [(n, self._stat(os.path.join(d, n))) for n in names]
        return found

    def extend(self):
        """Add the files of modules imported since; the stats already taken stay (they describe what is loaded)."""
        for path in self._module_files():
            if path not in self.stats:
                self.files.append(path)
                self.stats[path] = self._stat(path)

    def changed(self):
        """The first difference from disk, or None."""
        if self._dists() != self.dists:
            return "installed distributions changed (site dirs: dist-info/egg-info/.pth entries)"
        for path in self.files:
            now = self._stat(path)
            if now == self.stats[path]:
                continue
            if now is None and not any(os.path.realpath(path).startswith(d + os.sep) for d in self.dirs):
                continue  # generated at import into a temp dir and since removed (torch.distributed.nn does this)
            return f"a loaded module file changed on disk: {path}"
        return None


def set_parent_death_signal(sig):
    """Linux prctl(PR_SET_PDEATHSIG, sig): the kernel signals us when the thread that started us ends."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(1, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def fork_unsafe():
    """None when forking is safe, else why not."""
    return device_state() or thread_state()


def device_state():
    """Why a device runtime makes forking unsafe (initialised in this process), or None."""
    torch = sys.modules.get("torch")
    for name in ("cuda", "npu", "xpu", "mlu"):
        backend = getattr(torch, name, None) if torch is not None else None
        is_init = getattr(backend, "is_initialized", None)
        if callable(is_init) and is_init():
            return f"torch.{name} is initialised in the warm parent (a forked child cannot use it)"
    return None


def thread_state():
    extra = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if extra:
        return f"the warm parent runs Python threads {extra} (fork would copy their locks, not them)"
    return None


def preload(names):
    loaded, errors = [], {}
    for name in names:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except Exception as exc:  # boundary: a library that does not import stays for the child to import (and fail)
            errors[name] = f"{type(exc).__name__}: {exc}"
    return loaded, errors


def learnable(modules_file, dirs, script_dir):
    """Modules a child imported from the runtime's site dirs (never from the probe's folder), in import order."""
    try:
        with open(modules_file, encoding="utf-8") as fh:
            reported = json.load(fh)
    except (OSError, ValueError):
        return []
    out = []
    for name, path in reported:
        if name in sys.modules or not path:
            continue
        real = os.path.realpath(path)
        if real.startswith(script_dir + os.sep):
            continue
        if any(real.startswith(d + os.sep) for d in dirs):
            out.append(name)
    return out


def report_modules(path, before):
    """In the child: every module imported since the fork, with its file (the parent filters)."""
    new = [(name, getattr(mod, "__file__", None)) for name, mod in list(sys.modules.items()) if name not in before]
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump([(n, f) for n, f in new if isinstance(f, str)], fh)
    except OSError:
        pass


def exit_code_of(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def child_main(req, keep_fds):
    """In the forked child: become the probe process a fresh ``python script args`` would have been."""
    code = 1
    try:
        os.setsid()
        set_parent_death_signal(signal.SIGKILL)  # the server is killed -> so is the probe (a server that exits
        # kills the probe's whole group itself)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM):  # as in a fresh interpreter (SIGPIPE stays ignored)
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in keep_fds:
            os.close(fd)
        sys.stdout.flush()
        sys.stderr.flush()
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for src, dst in ((null, 0), (out, 1), (err, 2)):
            os.dup2(src, dst)
            os.close(src)
        os.chdir(req["cwd"] or os.getcwd())
        os.environ.clear()
        os.environ.update(req["env"])
        script = req["script"]
        sys.argv = [script, *req["args"]]
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        importlib.invalidate_caches()  # files written since the parent started (a new plugin) must be found
        before = set(sys.modules)
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exit_code_of(exc)
        except BaseException:  # the interpreter's own top level: print the traceback, exit 1
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()  # what interpreter shutdown would run (the probe's handlers; the server has none)
        if req.get("modules"):
            report_modules(req["modules"], before)
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # before the probe ran (a missing cwd, say): say why on the probe's stderr, exit 1
        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(code)


def send(conn, payload):
    try:
        conn.sendall((json.dumps(payload) + "\n").encode())
        return True
    except OSError:
        return False


class Server:
    def __init__(self, args):
        self.args = args
        self.control = socket.socket(fileno=args.control_fd)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(args.listen)
        self.listener.listen(64)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: self.shutdown(0))
        self.buffers = {}  # conn -> bytes received so far
        self.children = {}  # pid -> (conn, request)
        self.by_conn = {}  # conn -> pid
        self.dirs = site_dirs()
        self.learn = not args.no_learn
        self.learned = []

    def fds(self):
        return [self.control.fileno(), self.listener.fileno(), self.wake_r, self.wake_w,
                *(c.fileno() for c in self.buffers)]

    def start(self):
        start = time.monotonic()
        loaded, errors = preload([n for n in self.args.preload.split(",") if n])
        self.snapshot = Snapshot(self.dirs)
        send(self.control, {"ready": True, "pid": os.getpid(), "python": sys.executable,
                            "version": sys.version.split()[0], "preloaded": loaded, "preload_errors": errors,
                            "preload_s": round(time.monotonic() - start, 2), "modules": len(sys.modules),
                            "unsafe": fork_unsafe(), "pdeathsig": self.pdeathsig, "site_dirs": self.dirs})

    def shutdown(self, code):
        for pid in list(self.children):
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.unlink(self.args.listen)
        except OSError:
            pass
        os._exit(code)

    def handle(self, conn, msg):
        if msg.get("op") == "status":  # what the parent holds (tests check it never holds plugin code)
            send(conn, {"learned": self.learned, "children": sorted(self.children),
                        "loaded": {n: n in sys.modules for n in msg.get("names", [])}})
            return self.drop(conn)
        if msg.get("op") == "kill":
            pid = self.by_conn.get(conn)
            if pid is not None:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            return
        if msg.get("op") != "run":
            send(conn, {"error": f"unknown op {msg.get('op')!r}"})
            return self.drop(conn)
        stale = self.snapshot.changed()
        if stale:
            send(conn, {"stale": stale})
            return self.drop(conn)
        unsafe = fork_unsafe()
        if unsafe:
            send(conn, {"cold": unsafe})
            return self.drop(conn)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            child_main(msg, self.fds())
        self.children[pid] = (conn, msg)
        self.by_conn[conn] = pid
        send(conn, {"pid": pid})

    def drop(self, conn):
        self.buffers.pop(conn, None)
        pid = self.by_conn.pop(conn, None)
        if pid is not None and pid in self.children:  # the client went away mid-probe: end the probe's group
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        conn.close()

    def reap(self):
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn, req = self.children.pop(pid, (None, None))
            if conn is None:
                continue
            try:  # leftovers of the probe's group (a grandchild it started) die with it, as after a fresh run
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.by_conn.pop(conn, None)
            send(conn, {"exit": os.waitstatus_to_exitcode(status)})
            self.buffers.pop(conn, None)
            conn.close()
            if req.get("modules"):
                self.absorb(req)

    def absorb(self, req):
        """Import, in the parent, the site-dir modules the child needed (edit-independent by construction)."""
        script_dir = os.path.dirname(os.path.realpath(req["script"]))
        names = learnable(req["modules"], self.dirs, script_dir) if self.learn else []
        try:
            os.unlink(req["modules"])
        except OSError:
            pass
        if not names:
            return
        loaded, _ = preload(names)
        self.learned += loaded
        self.snapshot.extend()

    def serve(self):
        while True:
            if os.getppid() != self.args.agent_pid:  # the agent is gone (belt and braces for the death signal)
                self.shutdown(0)
            ready, _, _ = select.select([self.control, self.listener, self.wake_r, *self.buffers], [], [], 1.0)
            for item in ready:
                if item is self.control:
                    if not self.control.recv(4096):
                        self.shutdown(0)
                elif item is self.listener:
                    conn, _ = self.listener.accept()
                    self.buffers[conn] = b""
                elif item == self.wake_r:
                    try:
                        os.read(self.wake_r, 4096)
                    except BlockingIOError:
                        pass
                elif item in self.buffers:
                    self.receive(item)
            self.reap()

    def receive(self, conn):
        try:
            data = conn.recv(65536)
        except OSError:
            data = b""
        if not data:
            return self.drop(conn)
        self.buffers[conn] += data
        while conn in self.buffers and b"\n" in self.buffers[conn]:
            line, rest = self.buffers[conn].split(b"\n", 1)
            self.buffers[conn] = rest
            try:
                msg = json.loads(line)
                self.handle(conn, msg)
            except (ValueError, KeyError, TypeError) as exc:  # a malformed request ends that connection only
                send(conn, {"error": f"malformed request: {type(exc).__name__}: {exc}"})
                return self.drop(conn)


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--control-fd", type=int, required=True)
    ap.add_argument("--listen", required=True)
    ap.add_argument("--agent-pid", type=int, required=True)
    ap.add_argument("--preload", default="torch,transformers")
    ap.add_argument("--no-learn", action="store_true")
    args = ap.parse_args(argv)
    # SIGTERM, not SIGKILL: its handler (installed before any child exists) kills every probe's group first
    pdeathsig = set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != args.agent_pid:  # the agent died before the signal was armed
        return 0
    server = Server(args)
    server.pdeathsig = pdeathsig
    server.start()
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
