"""The real Megatron route on the CPU (issue 39, first part): scripts/real_target.sh --megatron puts megatron/ in the
real checkout and layers MM's Megatron-route dependencies on the real runtime; the Megatron route migrates the tiny
Qwen2.5-VL into it (rules policy; its gates stop at the training slot, which does not use the shim yet); then the
delivered launch script, model JSON and data JSON go through the real framework under msmigrate's CPU shim: the
target's own model_provider builds the VLMModel, the target's own converter's output of the source's weights loads
into it, one real batch runs forward and backward, and the logits equal the source's within the bf16 tolerance.
The kernels the step used are the shim's CPU references. Measured here: 17 min on a loaded 2-core machine (the route ~10 min, the step ~3 min)."""

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
    from msmigrate.tools.megatron.launch_script import parse_launch_script
    from msmigrate.tools.megatron.real_step import real_step

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
    meg = out["plan"]["megatron"]
    for slot in ("G1", "G2", "G3"):
        assert out["gates"][slot]["passed"], (slot, out["gates"][slot]["summary"])
    # the delivery as committed on the run's branch
    wt = tmp_path / "delivered"
    subprocess.run(["git", "-C", str(target), "worktree", "add", "-q", "--detach", str(wt), f"msmigrate/{run_id}"],
                   check=True)
    conv = target_converter_roundtrip(real_runtime, wt, out["plan"]["converter"], tmp_path / "conv", hf_dir=source)
    assert conv.ok, conv.error or conv.problems
    launch = parse_launch_script((wt / meg["script_path"]).read_text(encoding="utf-8"))
    res = real_step(python, wt, launch.flags, load=tmp_path / "conv" / "mm", source=source)
    assert res.ok, (res.error, res.problems, res.missing_kernel, res.facts)
    f = res.facts
    assert f["model_class"] == "VLMModel" and f["load"]["loaded"] and f["load"]["tensors"] > 0
    assert f["params_with_grad"] > 0 and f["grads_nonzero"] == f["params_with_grad"]
    assert f["parity"]["max_abs_diff"] <= f["parity"]["tolerance"] and f["parity"]["positions"] > 0
    used = {k.split("(")[0] for k in res.kernels}
    assert {"npu_rms_norm", "npu_fusion_attention", "npu_rotary_mul"} <= used, res.kernels
    assert res.missing_kernel is None
