"""Durability: kill -9 a headless run while it is in the verify phase, resume it, finish green — and no finished
training launch runs twice (the launcher finds the identical finished launch recorded in launches.jsonl)."""

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

from delivery_checks import assert_mergeable

pytestmark = pytest.mark.integration


def _events(run_dir: Path) -> list[dict]:
    path = run_dir / "launches.jsonl"
    if not path.is_file():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def test_kill_mid_verify_then_resume_without_duplicate_launch(migration_inputs, tmp_path):
    source, target = migration_inputs("qwen2_5_vl")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"source": str(source), "target": str(target), "model_name": "qwen2_5_vl",
                                    "policy": "rules", "launch": {"gate_train_iters": 5}}))
    runs = tmp_path / "runs"
    cmd = [sys.executable, "-m", "msmigrate.faces.cli", "run", str(spec), "--runs-dir", str(runs)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 600
    run_dir = None
    while time.time() < deadline and proc.poll() is None:
        dirs = list(runs.glob("*/")) if runs.is_dir() else []
        run_dir = dirs[0] if dirs else None
        events = _events(run_dir) if run_dir else []
        # G4 finished and the next launch (G5) has started: the process is inside the verify node
        if any(e["event"] == "finished" and e["launch_id"].startswith("g4-") for e in events) and \
                any(e["event"] == "started" and e["launch_id"].startswith("g5-") for e in events):
            break
        time.sleep(0.5)
    assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
    os.killpg(proc.pid, signal.SIGKILL)  # the agent dies mid-phase; its launched job is left orphaned
    proc.wait()
    assert run_dir is not None
    run_id = run_dir.name
    resumed = subprocess.run([sys.executable, "-m", "msmigrate.faces.cli", "run", "--resume", run_id,
                              "--runs-dir", str(runs)], capture_output=True, text=True, timeout=900)
    summary = json.loads(resumed.stdout)
    assert summary["exit_status"] == "success", resumed.stderr[-3000:]
    assert all(summary["gates"][g] for g in ("G0", "G1", "G2", "G3", "G4", "G5", "G6"))
    starts = Counter(e["launch_id"] for e in _events(run_dir) if e["event"] == "started")
    g4 = [k for k in starts if k.startswith("g4-")]
    assert len(g4) == 1 and starts[g4[0]] == 1, starts  # the finished G4 launch was reused, not rerun
    drives = [r for r in (json.loads(ln) for ln in (run_dir / "trajectory.jsonl").read_text().splitlines())
              if r["kind"] == "drive"]
    assert [d["resumed"] for d in drives] == [False, True]
    # counts stay true across the kill: every launch attempt in the journal is counted, in the summary and report
    attempts = sum(starts.values())
    assert summary["counters"]["launches"] == attempts, (summary["counters"], starts)
    assert f"training launches: {attempts}" in (run_dir / "verification_report.md").read_text()
    # the delivery the resumed run finished, read as a maintainer reads it
    assert_mergeable(json.loads((run_dir / "evidence.json").read_text()), target, run_id, source, run_dir=run_dir)
