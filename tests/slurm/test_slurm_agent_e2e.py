"""The whole agent with ``launch.backend: slurm`` on a real slurmctld/slurmd: G4–G6 run as sbatch jobs on CPU; the
agent is killed -9 while a G5 job runs, the job outlives it, and the resumed run re-attaches to that job instead of
submitting it again, then finishes green with job ids, node lists and exit codes in its evidence."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from msmigrate.tools.launcher.slurm_jobs import job_info

pytestmark = [pytest.mark.slurm, pytest.mark.integration]


def _events(run_dir: Path | None) -> list[dict]:
    path = run_dir / "launches.jsonl" if run_dir else None
    if path is None or not path.is_file():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def test_gates_through_sbatch_kill_then_reattach(slurm_cluster, tmp_path):
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.standin import write_standin

    source = build_source("qwen2_5_vl", tmp_path / "qwen2_5_vl")
    target = write_standin(tmp_path / "MindSpeed-MM", with_assets=False)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "source": str(source), "target": str(target), "model_name": "qwen2_5_vl", "policy": "rules",
        "launch": {"backend": "slurm", "device": "cpu", "gate_train_iters": 5, "slurm": {"poll_s": 0.5}},
    }))
    runs = tmp_path / "runs"
    cmd = [sys.executable, "-m", "msmigrate.faces.cli", "run", str(spec), "--runs-dir", str(runs)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline, run_dir, victim = time.time() + 600, None, None
    while time.time() < deadline and proc.poll() is None:
        dirs = list(runs.glob("*/")) if runs.is_dir() else []
        run_dir = dirs[0] if dirs else None
        events = _events(run_dir)
        finished = {(e["launch_id"], e["attempt"]) for e in events if e["event"] == "finished"}
        victim = next((e for e in events if e["event"] == "running" and e["launch_id"].startswith("g5-")
                       and (e["launch_id"], e["attempt"]) not in finished), None)
        if victim:  # a G5 job is running on the cluster: the agent dies now
            break
        time.sleep(0.3)
    assert proc.poll() is None and victim, proc.stdout.read().decode()[-3000:]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    job_id = victim["job_id"]
    assert job_info(job_id).state in ("RUNNING", "COMPLETING", "COMPLETED")  # the job outlived its agent

    resumed = subprocess.run([sys.executable, "-m", "msmigrate.faces.cli", "run", "--resume", run_dir.name,
                              "--runs-dir", str(runs)], capture_output=True, text=True, timeout=900)
    summary = json.loads(resumed.stdout)
    assert summary["exit_status"] == "success", resumed.stderr[-3000:]
    assert all(summary["gates"][g] for g in ("G0", "G1", "G2", "G3", "G4", "G5", "G6"))

    events = _events(run_dir)
    trail = "\n".join(json.dumps({k: e.get(k) for k in ("event", "launch_id", "attempt", "job_id", "status")})
                      for e in events)
    submitted = Counter(e["launch_id"] for e in events if e["event"] == "submitted")
    assert submitted and all(n == 1 for n in submitted.values()), trail  # nothing submitted twice
    assert job_id in {e["job_id"] for e in events if e["event"] == "reattached"}
    (end,) = [e for e in events if e["event"] == "finished" and e.get("job_id") == job_id]
    assert end["status"] == "succeeded" and end["reattached"] and end["exit_code"] == 0

    evidence = json.loads((run_dir / "evidence.json").read_text())
    g6 = evidence["gates"]["G6"]["evidence"][0]
    assert g6["backend"] == "slurm" and g6["job_id"] and g6["nodes"] in slurm_cluster.nodes and g6["exit_code"] == 0
    # every launch of G4-G6 is a job; G4 and G6 also carry probes (training parity, G4's HF export, sharded parity:
    # run in the target runtime on this host, no launch, no job)
    jobs = {ev["job_id"] for g in ("G4", "G5", "G6") for ev in evidence["gates"][g]["evidence"]
            if not ev.get("label", "").startswith(("sharded parity", "training parity", "HF weights out"))}
    launches = {e["launch_id"] for e in events if e["event"] == "started"}
    assert job_id in jobs and len(jobs) == len(launches) >= 4  # G4, G5 (repeat, load), G6: one job each
    report = (run_dir / "verification_report.md").read_text()
    assert "## Scheduler jobs" in report and f"| {g6['job_id']} | {g6['nodes']} | COMPLETED | 0 |" in report
    # the G6 job took its rendezvous from the allocation, and its 2 ranks formed one data-parallel group
    log = Path(g6["log_path"]).read_text()
    node = g6["nodes"]
    assert f"[msmigrate] slurm job {g6['job_id']} nodes {node} master {node} (127.0.0.1:" in log
    assert g6["metrics"]["global_batch_size"] >= 2 and g6["metrics"]["steps"] >= 5
    (g6_start,) = [e for e in events if e["event"] == "started" and e["launch_id"].startswith("g6-")]
    script = Path(g6_start["script_path"]).read_text()
    assert "srun " in script and "scontrol show hostnames" in script and "--node_rank" not in script
    assert f"--nodes={1}" in g6_start["sbatch_argv"] and "--parsable" in g6_start["sbatch_argv"]
