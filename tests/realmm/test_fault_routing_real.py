"""benchmarks/bench_fault_routing.py --target real on a few faults: a green rules migration into a copy of a real
MindSpeed-MM checkout (the real runtime builds the source and runs the gates), one fault per copy, the gates as
`msmigrate verify` runs them. One fault per owner: the YAML (a range G3 must catch before any launch), the plugin (a
registration the real registry does not find), a media file (an image that is an HTML page) — each must reach a
gate, go back to its owner's phase and have the report name what the fix changes — and the runtime (an interpreter
that is not there), which the run refuses before any gate, naming runtime_python."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.realmm, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
FAULTS = ("config-grad-accum-zero", "model-register-id-typo", "data-image-corrupt", "env-runtime-missing")


def test_faults_on_the_real_checkout_go_back_to_their_owner(tmp_path, real_checkout, real_runtime):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MSMIGRATE_RESULTS_MD": "0"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/bench_fault_routing.py"), "--target", "real",
                           "--real-checkout", str(real_checkout), "--real-runtime", real_runtime,
                           "--workdir", str(tmp_path), "--only", ",".join(FAULTS)],
                          capture_output=True, text=True, timeout=2400, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    results = {r["id"]: r for r in json.loads((tmp_path / "results.json").read_text())["results"]}
    assert set(results) == set(FAULTS) and not any("error" in r for r in results.values()), results
    assert results["config-grad-accum-zero"]["gate"] == "G3"
    assert results["model-register-id-typo"]["gate"] == "G1"
    assert results["data-image-corrupt"]["gate"] == "G2"
    for fault in FAULTS[:3]:
        r = results[fault]
        assert r["routed"] and r["fix_named"] and not r["confidently_wrong"], (fault, r)
    runtime = results["env-runtime-missing"]
    assert runtime["stopped"] and runtime["fix_named"] and "runtime_python" in runtime["detail"], runtime
    # the green migration was the real checkout's copy, the checkout itself untouched
    assert subprocess.run(["git", "-C", str(real_checkout), "status", "--porcelain"], capture_output=True,
                          text=True).stdout == ""
