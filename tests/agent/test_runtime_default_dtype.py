"""torch's default dtype in the runtime: G0's env probe reads it (run here for real, with and without a start-up
hook that sets float64), and G3 fails when it is none the delivered YAML trains in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msmigrate
from msmigrate.agent.routes.fsdp2.gates.source_settings import default_dtype_findings
from msmigrate.knowledge.classifier import classify

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"
CFG = {"parallel": {"fsdp_plan": {"param_dtype": "bf16", "reduce_dtype": "fp32"}}, "training": {"lr": 1e-4}}


def _probed_default(tmp_path: Path, hook: str | None) -> str:
    env = dict(os.environ)
    if hook is not None:
        (tmp_path / "sitecustomize.py").write_text(hook)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH")) if p)
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import env_probe; "
            "print(json.dumps(env_probe.probe_torch_side()))")
    out = subprocess.run([sys.executable, "-c", code, str(PROBES)], capture_output=True, text=True, timeout=300,
                         env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])["default_dtype"]


def test_the_env_probe_reads_the_default_dtype_a_start_up_hook_sets(tmp_path):
    assert _probed_default(tmp_path, None) == "float32"
    assert _probed_default(tmp_path, "import torch\ntorch.set_default_dtype(torch.float64)\n") == "float64"


def test_a_default_dtype_the_config_does_not_train_in_fails_and_is_the_environments():
    assert default_dtype_findings(CFG, {"default_dtype": "float32"}, "c.yaml") == []
    assert default_dtype_findings(CFG, {"default_dtype": "bfloat16"}, "c.yaml") == []  # the YAML's param_dtype
    assert default_dtype_findings(CFG, {}, "c.yaml") == []  # not read: nothing concluded
    found = default_dtype_findings(CFG, {"default_dtype": "float64"}, "c.yaml")
    assert [(f["code"], f["value"]) for f in found] == [("runtime-default-dtype", "float64")]
    assert "bfloat16, float32" in found[0]["message"]
    line = f"[{found[0]['code']}] {found[0]['path']}: {found[0]['message']}"
    assert classify(line, [found[0]["code"]], gate_verdict=[line]).owner == "environment"


def test_a_config_that_names_float64_may_train_in_it():
    cfg = {"parallel": {"fsdp_plan": {"param_dtype": "fp64"}}}
    assert default_dtype_findings(cfg, {"default_dtype": "float64"}, "c.yaml") == []
