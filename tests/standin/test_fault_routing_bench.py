"""benchmarks/bench_fault_routing.py end to end on two faults: a green migration is built, copied per fault, the
fault injected and committed, the gates run as ``msmigrate verify`` runs them, and the verdict scored. The two
faults surface in another phase's gate than their owner's or against a matched case's usual owner: a
`gradient_accumulation_steps: 0` (G3's range check, config) and a plugin registering another id than the one the
migration chose (G1's registry lookup, whose catalog case is owned by config: the run's facts say model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_two_faults_are_routed_to_their_owner_with_the_fix_named(tmp_path):
    # MSMIGRATE_RESULTS_MD=0: the bench's figures stay out of the checkout's benchmarks/RESULTS.md
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MSMIGRATE_RESULTS_MD": "0"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/bench_fault_routing.py"), "--workdir",
                           str(tmp_path), "--only", "config-grad-accum-zero,model-register-id-typo"],
                          capture_output=True, text=True, timeout=1500, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = {r["id"]: r for r in json.loads((tmp_path / "results.json").read_text())["results"]}
    assert results["config-grad-accum-zero"]["gate"] == "G3"
    model = results["model-register-id-typo"]
    assert model["gate"] == "G1" and model["named"] == "model" and model["route"] == "model"
    assert all(r["routed"] and r["fix_named"] and not r["confidently_wrong"] for r in results.values()), results
