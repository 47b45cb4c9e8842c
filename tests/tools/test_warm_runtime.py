"""The warm target runtime: same outcome as a fresh process (exit code, output, environment, fresh imports of edited
code), timeouts kill the probe's whole process group, the parent never holds plugin code, stale servers restart,
unsafe parents fall back to fresh processes with the reason, and the server dies with the agent.

Most servers here preload only light modules (``MSMIGRATE_WARM_PRELOAD``) so the tests stay quick; the probe tests
(test_probes.py) run the real preload list in both modes."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from msmigrate.tools import warm_runtime
from msmigrate.tools.runtime import child_env, run_probe
from msmigrate.tools.warm_runtime import POOL, PRELOAD_ENV, SWITCH_ENV

PY = os.environ.get("MSMIGRATE_PROBE_TEST_PYTHON", sys.executable)  # the target runtime under test
SERVER = warm_runtime.SERVER_SCRIPT

ECHO = '''
import json, os, sys
RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "
print("log line", file=sys.stderr)
if "--fail" in sys.argv:
    sys.exit(3)
print(RESULT_MARKER + json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ),
                                  "path0": sys.path[0], "name": __name__, "stdin": sys.stdin.read()}), flush=True)
'''

HANG = '''
import json, os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
with open(sys.argv[1], "w") as fh:
    json.dump({"probe": os.getpid(), "grandchild": child.pid, "pgid": os.getpgid(0)}, fh)
time.sleep(300)
'''

PLUGIN_USER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import toy_plugin
print("MSMIGRATE_PROBE_RESULT " + json.dumps({"value": toy_plugin.VALUE}), flush=True)
'''


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def light(monkeypatch):
    """A warm server that preloads only json (starts in well under a second); closed after the test."""
    monkeypatch.setenv(SWITCH_ENV, "1")
    monkeypatch.setenv(PRELOAD_ENV, "json")
    yield
    POOL.close_all()


def _gone(pid: int) -> bool:
    """Dead or a zombie (a container's init may be slow to reap what it inherits)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def _wait_gone(pids, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not all(_gone(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if not _gone(p)]


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_child_is_the_process_a_fresh_run_would_be(mode, light, monkeypatch, tmp_path):
    monkeypatch.setenv(SWITCH_ENV, "1" if mode == "warm" else "0")
    probes = tmp_path / "probes"
    _write(probes, "echo.py", ECHO)
    extra = {"NON_MEGATRON": "true", "MSMIGRATE_TEST_VALUE": "x y"}
    res = run_probe(PY, "echo", ["--a", "1"], cwd=tmp_path, env_extra=extra, probes_dir=probes, timeout=60)
    assert res.ok, res.error
    assert res.data["runtime_mode"] == mode, res.data.get("runtime_reason")
    out = res.data["result"]
    assert out["argv"] == ["--a", "1"] and out["cwd"] == str(tmp_path) and out["name"] == "__main__"
    assert out["path0"] == str(probes) and out["stdin"] == ""
    expected = child_env(extra)
    expected.pop("PYTEST_CURRENT_TEST", None)
    out["env"].pop("PYTEST_CURRENT_TEST", None)
    assert out["env"] == expected  # exactly the scrubbed environment of the one env function, nothing inherited
    fail = run_probe(PY, "echo", ["--fail"], cwd=tmp_path, probes_dir=probes, timeout=60)
    assert not fail.ok and fail.data["returncode"] == 3 and "log line" in fail.data["stderr_tail"]
    assert fail.error == "probe echo exited 3 without a result"


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_hanging_probe_times_out_and_its_group_dies(mode, light, monkeypatch, tmp_path):
    monkeypatch.setenv(SWITCH_ENV, "1" if mode == "warm" else "0")
    probes = tmp_path / "probes"
    _write(probes, "hang.py", HANG)
    pids = tmp_path / "pids.json"
    start = time.monotonic()
    res = run_probe(PY, "hang", [str(pids)], probes_dir=probes, timeout=4)
    assert time.monotonic() - start < 30
    assert not res.ok and res.error.startswith("probe hang timed out after 4s (") and res.data["returncode"] is None
    assert res.data["runtime_mode"] == mode
    seen = json.loads(pids.read_text())
    # its own process group (cold: led by the supervisor that stops the group if the agent dies)
    assert seen["pgid"] == seen["probe"] or (mode == "cold" and seen["pgid"] != os.getpgrp())
    assert _wait_gone([seen["probe"], seen["grandchild"]]) == []
    if mode == "warm":  # the server survives a killed probe and serves the next one
        (server,) = POOL.servers()
        assert server.alive() and server.status()["children"] == []


def test_edited_plugin_is_imported_fresh_and_never_by_the_parent(light, tmp_path):
    probes, target = tmp_path / "probes", tmp_path / "target"
    _write(probes, "use_plugin.py", PLUGIN_USER)
    _write(target, "toy_plugin.py", "VALUE = 1\n")
    first = run_probe(PY, "use_plugin", [str(target)], probes_dir=probes, timeout=60)
    assert first.ok and first.data["runtime_mode"] == "warm" and first.data["result"]["value"] == 1
    _write(target, "toy_plugin.py", "VALUE = 2  # edited between probes\n")
    second = run_probe(PY, "use_plugin", [str(target)], probes_dir=probes, timeout=60)
    assert second.ok and second.data["result"]["value"] == 2
    (server,) = POOL.servers()
    status = server.status(["toy_plugin", "use_plugin", "json"])
    assert status["loaded"] == {"toy_plugin": False, "use_plugin": False, "json": True}
    assert not any(n.startswith("toy_plugin") for n in status["learned"])


def test_learned_site_modules_are_imported_by_the_parent(light, tmp_path):
    probes = tmp_path / "probes"
    _write(probes, "uses_stdlib.py", '''
        import json, sys
        import fractions  # stdlib: from the runtime's own dirs, so the parent may take it over
        print("MSMIGRATE_PROBE_RESULT " + json.dumps({"ok": True}), flush=True)
    ''')
    assert run_probe(PY, "uses_stdlib", [], probes_dir=probes, timeout=60).ok
    (server,) = POOL.servers()
    for _ in range(50):  # the parent imports between probes, after it reaped the child
        if "fractions" in server.status()["learned"]:
            break
        time.sleep(0.1)
    assert server.status(["fractions"])["loaded"] == {"fractions": True}


def test_changed_preloaded_module_restarts_the_server(light, monkeypatch, tmp_path):
    lib = tmp_path / "lib"
    _write(lib, "warm_lib_x.py", "VALUE = 'old'\n")
    monkeypatch.setenv("PYTHONPATH", str(lib))
    monkeypatch.setenv(PRELOAD_ENV, "json,warm_lib_x")
    probes = tmp_path / "probes"
    _write(probes, "read_lib.py", '''
        import json, warm_lib_x
        print("MSMIGRATE_PROBE_RESULT " + json.dumps({"value": warm_lib_x.VALUE}), flush=True)
    ''')
    assert run_probe(PY, "read_lib", [], probes_dir=probes, timeout=60).data["result"]["value"] == "old"
    (first,) = POOL.servers()
    time.sleep(0.01)
    _write(lib, "warm_lib_x.py", "VALUE = 'new, and longer'\n")  # like a pip upgrade of a preloaded library
    res = run_probe(PY, "read_lib", [], probes_dir=probes, timeout=60)
    assert res.data["runtime_mode"] == "warm" and res.data["result"]["value"] == "new, and longer"
    (second,) = POOL.servers()
    assert second is not first and not first.alive()


def test_parent_with_threads_falls_back_to_fresh_processes(light, monkeypatch, tmp_path):
    lib = tmp_path / "lib"
    _write(lib, "starts_thread.py", "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), "
                                    "daemon=True).start()\n")
    monkeypatch.setenv("PYTHONPATH", str(lib))
    monkeypatch.setenv(PRELOAD_ENV, "json,starts_thread")
    probes = tmp_path / "probes"
    _write(probes, "echo.py", ECHO)
    res = run_probe(PY, "echo", [], probes_dir=probes, timeout=60)
    assert res.ok and res.data["runtime_mode"] == "cold"
    assert "Python threads" in res.data["runtime_reason"]
    again = run_probe(PY, "echo", [], probes_dir=probes, timeout=60)  # decided once: no new server per probe
    assert again.data["runtime_mode"] == "cold" and POOL.servers() == []


def test_device_initialised_in_parent_is_unsafe(monkeypatch):
    spec = importlib.util.spec_from_file_location("warm_server_mod", SERVER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    class Backend:
        def __init__(self, initialised):
            self.is_initialized = lambda: initialised

    class FakeTorch:
        cuda = Backend(False)
        npu = Backend(True)

    monkeypatch.setitem(sys.modules, "torch", FakeTorch())
    assert "torch.npu is initialised" in mod.device_state()
    FakeTorch.npu = Backend(False)
    assert mod.device_state() is None


def test_snapshot_sees_a_new_distribution(tmp_path):
    spec = importlib.util.spec_from_file_location("warm_server_mod", SERVER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    site = tmp_path / "site-packages"
    (site / "a-1.0.dist-info").mkdir(parents=True)
    snap = mod.Snapshot([str(site)])
    assert snap.changed() is None
    (site / "b-2.0.dist-info").mkdir()  # pip install b
    assert "installed distributions changed" in snap.changed()


def test_turned_off_and_run_close_end_servers(light, monkeypatch, tmp_path):
    probes = tmp_path / "probes"
    _write(probes, "echo.py", ECHO)
    assert run_probe(PY, "echo", [], probes_dir=probes, timeout=60).data["runtime_mode"] == "warm"
    (server,) = POOL.servers()
    POOL.close_all()  # what Run.close calls
    assert not server.alive() and not Path(server.sock_path).exists()
    monkeypatch.setenv(SWITCH_ENV, "0")
    res = run_probe(PY, "echo", [], probes_dir=probes, timeout=60)
    assert res.data["runtime_mode"] == "cold" and SWITCH_ENV in res.data["runtime_reason"]


AGENT = '''
import json, sys, time
from pathlib import Path
from msmigrate.tools.runtime import run_probe
from msmigrate.tools.warm_runtime import POOL
res = run_probe(sys.argv[3], "hang", [sys.argv[2]], probes_dir=Path(sys.argv[1]), timeout=300)
'''


def test_server_and_probe_die_with_the_agent(light, tmp_path):
    """kill -9 of the agent mid-probe: the server (control socket EOF, parent-death signal) and the probe's whole
    group go with it."""
    probes = tmp_path / "probes"
    _write(probes, "hang.py", HANG)
    pids = tmp_path / "pids.json"
    agent = subprocess.Popen([sys.executable, "-c", AGENT, str(probes), str(pids), PY], env={**os.environ},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not pids.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pids.exists(), agent.stderr.read().decode() if agent.poll() is not None else "probe never started"
    time.sleep(0.2)
    seen = json.loads(pids.read_text())
    server_pid = int(Path(f"/proc/{seen['probe']}/stat").read_text().rsplit(")", 1)[1].split()[1])  # probe's ppid
    assert server_pid != agent.pid and not _gone(server_pid)
    agent.kill()
    agent.wait()
    assert _wait_gone([server_pid, seen["probe"], seen["grandchild"]]) == []


def test_a_forked_agent_starts_its_own_server(light, tmp_path):
    """A copy of the agent made by fork (multiprocessing's default on Linux) must not wait on the parent's spawner
    thread (it did not survive the fork) nor stop the parent's server."""
    probes = tmp_path / "probes"
    _write(probes, "echo.py", ECHO)
    assert run_probe(PY, "echo", [], probes_dir=probes, timeout=60).data["runtime_mode"] == "warm"
    (parent_server,) = POOL.servers()
    pid = os.fork()
    if pid == 0:  # the forked copy: one probe through its own server, then a hard exit
        code = 1
        try:
            res = run_probe(PY, "echo", [], probes_dir=probes, timeout=60)
            mine = POOL.servers()
            code = 0 if res.ok and res.data["runtime_mode"] == "warm" and mine and mine[0] is not parent_server else 2
            POOL.close_all()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert parent_server.alive() and run_probe(PY, "echo", [], probes_dir=probes, timeout=60).ok


PROMPT_THEN_RESULT = '''
import json, sys
# what transformers prints when remote code is loaded without trust_remote_code and stdin gives no answer
sys.stdout.write("Do you wish to run the custom code? [y/N] ")
print("MSMIGRATE_PROBE_RESULT " + json.dumps({"value": 7}), flush=True)
'''


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_result_after_text_left_on_the_line_is_still_read(mode, light, monkeypatch, tmp_path):
    """A probed plugin that leaves a prompt without a newline on stdout must not turn the probe's result into
    "exited 0 without a result" (blind live run 8 lost a G1 attempt and three requests to that)."""
    monkeypatch.setenv(SWITCH_ENV, "1" if mode == "warm" else "0")
    probes = tmp_path / "probes"
    _write(probes, "prompting.py", PROMPT_THEN_RESULT)
    res = run_probe(PY, "prompting", [], probes_dir=probes, timeout=60)
    assert res.ok, res.error
    assert res.data["result"] == {"value": 7}


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_a_probe_a_signal_ends_is_named_by_the_signal_and_what_it_says_of_the_host(mode, light, monkeypatch,
                                                                                   tmp_path):
    monkeypatch.setenv(SWITCH_ENV, "1" if mode == "warm" else "0")
    probes = tmp_path / "probes"
    _write(probes, "sigill.py", "import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n")
    fail = run_probe(PY, "sigill", [], cwd=tmp_path, probes_dir=probes, timeout=60)
    assert not fail.ok and fail.data["returncode"] == -4
    assert fail.error.startswith("probe sigill was killed by SIGILL (exit -4) without a result: an illegal "
                                 "instruction")
    assert "CPU" in fail.error and "host" in fail.error


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_a_probe_that_aborts_is_named_with_the_last_error_line_it_printed(mode, light, monkeypatch, tmp_path):
    """A native library that refuses to start (two OpenMP runtimes in one process) prints why, then aborts: the
    one line the run stops with carries that why, not only the signal."""
    monkeypatch.setenv(SWITCH_ENV, "1" if mode == "warm" else "0")
    probes = tmp_path / "probes"
    _write(probes, "aborts.py", "import os, resource, signal, sys\nresource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
                                "sys.stderr.write('loading\\nOMP: Error #15: Initializing libiomp5.so, but found "
                                "libgomp.so.1 already initialized.\\nOMP: Hint This means ...\\n')\n"
                                "sys.stderr.flush()\nos.kill(os.getpid(), signal.SIGABRT)\n")
    fail = run_probe(PY, "aborts", [], cwd=tmp_path, probes_dir=probes, timeout=60)
    assert not fail.ok and fail.data["returncode"] == -6
    assert fail.error.startswith("probe aborts was killed by SIGABRT (exit -6) without a result: aborted by compiled "
                                 "code of the runtime itself")
    assert fail.error.endswith("its last error line: OMP: Error #15: Initializing libiomp5.so, but found libgomp.so.1 "
                               "already initialized.")
