"""No orphans: probes, launch scripts, torchrun and its ranks die with the agent (kill -9), and a resume reaps a
group whose supervisor was killed too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from msmigrate.tools.launcher import records
from msmigrate.tools.launcher.run import group_members, reap_interrupted

REPO = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_for_pids(path: Path, n: int, timeout: float = 90.0) -> list[int]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.is_file():
            pids = [int(x) for x in path.read_text().split()]
            if len(pids) >= n:
                return pids
        time.sleep(0.2)
    pytest.fail(f"the job never wrote {n} pids to {path}")


def wait_gone(pids: list[int], timeout: float = 20.0) -> list[int]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.2)
    return [p for p in pids if alive(p)]


def start_agent(code: str, tmp_path: Path) -> subprocess.Popen:
    """A stand-in for the agent: a Python process that starts a child through msmigrate's own spawn path."""
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.Popen([sys.executable, str(script)], cwd=REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_probe_and_its_background_children_die_with_the_agent(tmp_path):
    pids = tmp_path / "pids"
    job = tmp_path / "job.sh"
    job.write_text(f"sleep 300 &\necho $! >> {pids}\necho $$ >> {pids}\nsleep 300\n")
    agent = start_agent(f"""
        from msmigrate.tools.runtime import run_process
        run_process(["bash", "{job}"], timeout=600)
    """, tmp_path)
    found = wait_for_pids(pids, 2)
    assert all(alive(p) for p in found)
    agent.send_signal(signal.SIGKILL)
    agent.wait()
    assert wait_gone(found) == [], "children outlived a kill -9 of the agent"


@pytest.mark.integration
def test_torchrun_and_its_ranks_die_with_the_agent(tmp_path):
    """A launch-script launch (bash → torchrun → 2 ranks) through the launcher; kill -9 the agent mid-run."""
    target = tmp_path / "tgt"
    (target / "examples" / "m").mkdir(parents=True)
    pids = tmp_path / "pids"
    (target / "rank.py").write_text(f"import os, time\nopen({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
                                    "time.sleep(300)\n")
    (target / "examples/m/finetune_m.sh").write_text(
        f"echo $$ >> {pids}\n{sys.executable} -m torch.distributed.run --nproc_per_node 2 --master_port $MASTER_PORT "
        f"{target / 'rank.py'}\n")
    agent = start_agent(f"""
        from pathlib import Path
        from msmigrate.core.run_context import RunContext
        from msmigrate.tools.launcher import LaunchSpec, launch
        from msmigrate.tools.launcher.device import DeviceInfo
        ctx = RunContext(run_id="orph", run_dir=Path({str(tmp_path / 'run')!r}), source=Path("/nonexistent"),
                         target=Path({str(target)!r}), model_name="m")
        launch(ctx, LaunchSpec(gate="G6", script="examples/m/finetune_m.sh", nproc=2, device="cpu"),
               device_info=DeviceInfo(kind="cpu", count=0))
    """, tmp_path)
    found = wait_for_pids(pids, 3)  # bash + two ranks
    agent.send_signal(signal.SIGKILL)
    agent.wait()
    assert wait_gone(found, timeout=30) == [], "torchrun ranks outlived a kill -9 of the agent"


def test_resume_reaps_a_group_whose_supervisor_died_too(tmp_path):
    """Second net: the agent AND the supervisor were killed (say by the OOM killer): the job's other processes
    keep the group alive; reap_interrupted finds the group by its recorded id and kills it."""
    run_dir = tmp_path / "run"
    pids = tmp_path / "pids"
    job = tmp_path / "job.sh"
    job.write_text(f"sleep 300 &\necho $! >> {pids}\nsleep 300\n")
    from msmigrate.tools.subprocess_env import spawn

    argv = ["bash", str(job)]
    proc = spawn(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    records.append_event(run_dir, {"event": "started", "launch_id": "g6-x", "attempt": 1, "launch_key": "k",
                                   "gate": "G6", "argv": argv, "env": {}, "cwd": str(tmp_path)})
    records.append_event(run_dir, {"event": "spawned", "launch_id": "g6-x", "attempt": 1, "pid": proc.pid})
    (bg,) = wait_for_pids(pids, 1)
    os.kill(proc.pid, signal.SIGKILL)  # the supervisor dies without stopping its group
    proc.wait()
    assert alive(bg) and bg in group_members(proc.pid)
    reaped = reap_interrupted(run_dir)
    assert [r.launch_id for r in reaped] == ["g6-x"]
    assert wait_gone([bg]) == []
    assert records.interrupted_launches(run_dir) == []  # closed as "interrupted" in the journal


def test_reaper_leaves_a_recycled_pid_alone(tmp_path):
    """A recorded pid that now runs something else (pid reuse) is not killed."""
    run_dir = tmp_path / "run"
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        records.append_event(run_dir, {"event": "started", "launch_id": "g4-y", "attempt": 1, "launch_key": "k",
                                       "gate": "G4", "argv": ["bash", "something-else.sh"], "env": {}, "cwd": "."})
        records.append_event(run_dir, {"event": "spawned", "launch_id": "g4-y", "attempt": 1, "pid": other.pid})
        reap_interrupted(run_dir)
        time.sleep(0.3)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


@pytest.mark.integration
def test_resume_ends_every_rank_when_agent_and_supervisor_were_killed(tmp_path):
    """kill -9 of the launch supervisor and then of the agent during a real torchrun launch: torchrun and its ranks
    (each in a session of its own, outside the recorded group) keep running. The resumed agent's launch must end
    every one of them before it relaunches, and the relaunched ranks must find none of the old ones alive."""
    target = tmp_path / "tgt"
    (target / "examples" / "m").mkdir(parents=True)
    run_dir, pids, alone, relaunch = tmp_path / "run", tmp_path / "pids", tmp_path / "alone", tmp_path / "relaunch"
    (target / "rank.py").write_text(textwrap.dedent(f"""\
        import json, os, time
        if not os.path.exists({str(relaunch)!r}):
            open({str(pids)!r}, "a").write(f"{{os.getpid()}}\\n")
            time.sleep(300)
        old = [int(x) for x in open({str(relaunch)!r}).read().split()]  # the first launch's, as the test saw them
        def alive(pid):
            try:
                return open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
            except OSError:
                return False
        open({str(alone)!r}, "a").write(json.dumps({{"pid": os.getpid(), "old_alive": [p for p in old if alive(p)]}}) + "\\n")
        """))
    (target / "examples/m/finetune_m.sh").write_text(
        f"echo $$ >> {pids}\n{sys.executable} -m torch.distributed.run --nproc_per_node 2 --master_port $MASTER_PORT "
        f"{target / 'rank.py'}\n")
    launch_code = f"""
        from pathlib import Path
        from msmigrate.core.run_context import RunContext
        from msmigrate.tools.launcher import LaunchSpec, launch
        from msmigrate.tools.launcher.device import DeviceInfo
        ctx = RunContext(run_id="orph", run_dir=Path({str(run_dir)!r}), source=Path("/nonexistent"),
                         target=Path({str(target)!r}), model_name="m")
        res = launch(ctx, LaunchSpec(gate="G6", script="examples/m/finetune_m.sh", nproc=2, device="cpu",
                                     timeout_s=240), device_info=DeviceInfo(kind="cpu", count=0))
    """
    agent = start_agent(launch_code, tmp_path)
    old = wait_for_pids(pids, 3)  # bash + two ranks
    (first,) = records.read_launches(run_dir)
    os.kill(first.pid, signal.SIGKILL)  # the supervisor first: nothing is left to stop the group
    time.sleep(0.5)
    agent.send_signal(signal.SIGKILL)
    agent.wait()
    time.sleep(1.0)
    assert all(alive(p) for p in old), "the scenario needs survivors: the ranks outlived agent + supervisor"

    relaunch.write_text(" ".join(map(str, old)))  # the resumed agent relaunches the same launch; its ranks report what they find
    resumed = start_agent(launch_code, tmp_path)
    assert resumed.wait(timeout=240) == 0
    assert wait_gone(old, timeout=1) == [], "a rank of the interrupted launch survived the resume"
    seen = [json.loads(ln) for ln in alone.read_text().splitlines()]
    assert len(seen) == 2 and all(s["old_alive"] == [] for s in seen), seen  # the relaunch ran alone
    interrupted = [r for r in records.read_launches(run_dir) if r.attempt == 1]
    assert interrupted[0].status == "interrupted"
    finished = [json.loads(ln) for ln in (run_dir / records.JOURNAL).read_text().splitlines()
                if '"finished"' in ln and '"attempt": 1' in ln]
    assert set(old) <= set(finished[0]["ended_pids"])
