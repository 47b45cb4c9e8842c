"""The real Megatron route on the CPU (issue 39): scripts/real_target.sh --megatron puts megatron/ in the real
checkout and layers MM's Megatron-route dependencies on the real runtime; the Megatron route migrates the tiny
Qwen2.5-VL into it (rules policy, the delivered tp=2). Its training slot (G4) runs the CPU preflight: the delivered
conversion command (the target's own converter, one rank) on the source's weights, then the delivered launch script,
model JSON and data JSON through the real framework under msmigrate's CPU shim: the target's own model_provider
builds the VLMModel, the conversion's output loads strictly, one real batch runs forward and backward, and the logits
equal the source's within the bf16 tolerance. Then torchrun of the real pretrain_vlm.py trains 3 iterations at TP=1
(one rank) and at TP=2 (two gloo ranks, the delivered conversion run at tp_size 2) with the delivered JSONs and the
converted weights; G4 passes on the logged, finite, falling loss; G5 repeats the TP=1 launch (same losses), G6 cites
the two-rank launch; the run ends green, all of it in evidence.json and the report. Measured: the route ~10 min and
the step ~3 min on a loaded 2-core machine; each CPU launch ~45 s."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from realmm_helpers import megatron_target, source_for_runtime

pytestmark = [pytest.mark.realmm, pytest.mark.integration]


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
    # G4: the preflight ran the delivered conversion and the real step
    g4 = out["gates"]["G4"]
    pre = g4["cpu_preflight"]
    assert pre["readiness"]["ok"] and pre["conversion_run"]["ok"], pre
    assert pre["conversion_run"]["delivered"] == out["gates"]["G3"]["conversion"]["command"]
    assert pre["real_step"]["ok"] and pre["real_step"]["missing_kernel"] is None, pre["real_step"]
    used = {k.split("(")[0] for k in pre["real_step"]["kernels"]}
    assert {"npu_rms_norm", "npu_fusion_attention", "npu_rotary_mul"} <= used, pre["real_step"]["kernels"]
    # torchrun of the real pretrain_vlm.py: TP=1 and TP=2 trained on the CPU, the loss read from Megatron's log
    assert g4["passed"] and not g4["needs_accelerator"], g4["summary"]
    launches = {r["tp"]: r for r in g4["cpu_launches"]}
    assert sorted(launches) == [1, 2] and launches[2]["ranks"] == 2, g4["cpu_launches"]
    for r in launches.values():
        losses = [v for _, v in r["losses"]]
        assert r["ok"] and len(losses) == 3 and losses[-1] < losses[0], r
        assert "pretrain_vlm.py" in r["command"] and "torch.distributed.run" in r["command"]
    assert launches[2]["load"].endswith("mm_tp2") and launches[1]["load"] == pre["conversion_run"]["mm_dir"]
    assert abs(launches[1]["losses"][0][1] - launches[2]["losses"][0][1]) < 1e-2  # one model, two TP layouts
    assert out["gates"]["G5"]["passed"], out["gates"]["G5"]["summary"]
    assert out["gates"]["G6"]["passed"] and "over 2 gloo ranks" in out["gates"]["G6"]["summary"]
    assert out["exit_status"] == "success", out.get("exit_detail")
    step = next(e for e in g4["evidence"] if e["label"].startswith("real Megatron step"))
    f = step["metrics"]
    assert f["model_class"] == "VLMModel" and f["load"]["loaded"] and f["load"]["tensors"] > 0
    assert f["params_with_grad"] > 0 and f["grads_nonzero"] == f["params_with_grad"]
    assert f["parity"]["max_abs_diff"] <= f["parity"]["tolerance"] and f["parity"]["positions"] > 0
    # the same get_batch batch against the source's own chat template + processor: ids (media expansion) and labels
    dp = f["data_parity"]
    print("data parity:", {k: dp.get(k) for k in ("record", "records_scanned", "tokens", "media_tokens", "trained",
                                                   "label_convention", "padding_removed", "full_match",
                                                   "same_text_retokenized_from", "problems", "error")})
    assert dp["passed"] and dp["media_tokens"] == dp["source_media_tokens"] > 0 and dp["trained"] > 0, dp
    run_dir = tmp_path / "runs" / run_id
    evidence = (run_dir / "evidence.json").read_text()
    assert "real Megatron step on the CPU" in evidence and "checkpoint.convert_cli" in evidence
    report = (run_dir / "verification_report.md").read_text()
    assert "CPU preflight on the real framework (G4): converted with" in report
    assert "CPU training on the real framework (G4): torchrun pretrain_vlm.py" in report
    assert "pretrain_vlm.py under torchrun on the CPU, TP=2, 2 gloo rank(s)" in evidence
