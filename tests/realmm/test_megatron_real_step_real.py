"""The real Megatron route on the CPU (issue 39, first part): scripts/real_target.sh --megatron puts megatron/ in the
real checkout and layers MM's Megatron-route dependencies on the real runtime; the Megatron route migrates the tiny
Qwen2.5-VL into it (rules policy). Its training slot (G4) runs the CPU preflight: the delivered conversion command
(the target's own converter, one rank) on the source's weights, then the delivered launch script, model JSON and data
JSON through the real framework under msmigrate's CPU shim: the target's own model_provider builds the VLMModel, the
conversion's output loads strictly, one real batch runs forward and backward, and the logits equal the source's
within the bf16 tolerance; the launch at the delivered tp=2 is not run and G4 says so (needs_accelerator), in the
record, evidence.json and the report. The kernels the step used are the shim's CPU references. Measured before the
preflight was wired in: 17 min on a loaded 2-core machine (the route ~10 min, the step ~3 min)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from realmm_helpers import SCRIPT, source_for_runtime

pytestmark = [pytest.mark.realmm, pytest.mark.integration]


def megatron_target(dest: Path, snapshots: Path, runtime_python: str) -> dict[str, str]:
    venv = Path(runtime_python).parent.parent
    proc = subprocess.run(["bash", str(SCRIPT), str(dest), "--snapshots", str(snapshots), "--runtime", str(venv),
                           "--megatron"], capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.startswith(("target ", "runtime_python ")))


def test_delivered_qwen2_5_vl_builds_loads_and_matches_the_source_on_the_real_framework(tmp_path, realmm_tarballs,
                                                                                       real_runtime):
    from msmigrate.agent.config import RunSpec, Settings
    from msmigrate.agent.policies.rules import RulesPolicy
    from msmigrate.agent.runner import Run, new_run_id
    from msmigrate.tools.megatron.converter_roundtrip import target_converter_roundtrip

    printed = megatron_target(tmp_path / "t", realmm_tarballs, real_runtime)
    target, python = Path(printed["target"]), printed["runtime_python"]
    assert (target / "megatron" / "training" / "initialize.py").is_file()
    source = source_for_runtime("qwen2_5_vl", tmp_path / "src", real_runtime)
    run_id = new_run_id("tinyvl")
    spec = RunSpec(source=source, target=target, model_name="tinyvl", policy="rules", backend="megatron",
                   runtime_python=python)
    run = Run(spec, run_id, Settings(runs_dir=tmp_path / "runs", runtime_python=python), policy=RulesPolicy())
    try:
        out = run.drive()
    finally:
        run.close()
    for slot in ("G1", "G2", "G3"):
        assert out["gates"][slot]["passed"], (slot, out["gates"][slot]["summary"])
    # the delivery as committed on the run's branch
    wt = tmp_path / "delivered"
    subprocess.run(["git", "-C", str(target), "worktree", "add", "-q", "--detach", str(wt), f"msmigrate/{run_id}"],
                   check=True)
    conv = target_converter_roundtrip(real_runtime, wt, out["plan"]["converter"], tmp_path / "conv", hf_dir=source)
    assert conv.ok, conv.error or conv.problems
    # G4: the preflight ran the delivered conversion and the real step; the tp=2 launch was not run, and said so
    g4 = out["gates"]["G4"]
    pre = g4["cpu_preflight"]
    assert pre["readiness"]["ok"] and pre["conversion_run"]["ok"], pre
    assert pre["conversion_run"]["delivered"] == out["gates"]["G3"]["conversion"]["command"]
    assert pre["real_step"]["ok"] and pre["real_step"]["missing_kernel"] is None, pre["real_step"]
    used = {k.split("(")[0] for k in pre["real_step"]["kernels"]}
    assert {"npu_rms_norm", "npu_fusion_attention", "npu_rotary_mul"} <= used, pre["real_step"]["kernels"]
    tp = int(out["plan"]["parallel"]["tp"])
    assert not g4["passed"] and g4["needs_accelerator"], g4["summary"]  # the launch did not run here
    assert f"not run: tp {tp}" in g4["summary"] if tp > 1 else "not run:" in g4["summary"]
    assert out["exit_status"] == "needs_accelerator", out.get("exit_detail")
    step = next(e for e in g4["evidence"] if e["label"].startswith("real Megatron step"))
    f = step["metrics"]
    assert f["model_class"] == "VLMModel" and f["load"]["loaded"] and f["load"]["tensors"] > 0
    assert f["params_with_grad"] > 0 and f["grads_nonzero"] == f["params_with_grad"]
    assert f["parity"]["max_abs_diff"] <= f["parity"]["tolerance"] and f["parity"]["positions"] > 0
    run_dir = tmp_path / "runs" / run_id
    evidence = (run_dir / "evidence.json").read_text()
    assert "real Megatron step on the CPU" in evidence and "checkpoint.convert_cli" in evidence
    report = (run_dir / "verification_report.md").read_text()
    assert "CPU preflight on the real framework (G4): converted with" in report
    assert "G4 ran this conversion on the source's weights for one rank only" in report
