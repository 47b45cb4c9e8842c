"""The Megatron route into a clean real MindSpeed-MM checkout (real runtime, no accelerator): a spec with tp=2 for
the tiny Qwen2.5-VL runs plan → model / data / config phases → G1 (the real Qwen2_5_VLConverter round trip, entry
imports blocked only by torch_npu / Megatron-LM), G2, G3 (the real parser's flags, registries, sizes) green → the
training slot says it needs an accelerator. Measured here: ~1.5 min after the checkout is built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from realmm_helpers import real_target, source_for_runtime

pytestmark = [pytest.mark.realmm, pytest.mark.integration]


def test_tp2_megatron_route_into_real_checkout(tmp_path, realmm_tarballs, real_runtime):
    from msmigrate.agent.config import RunSpec, Settings
    from msmigrate.agent.policies.rules import RulesPolicy
    from msmigrate.agent.runner import Run, new_run_id

    target = Path(real_target(tmp_path / "t", realmm_tarballs, real_runtime)["target"])
    source = source_for_runtime("qwen2_5_vl", tmp_path / "src", real_runtime)
    spec = RunSpec(source=source, target=target, model_name="tinyvl", policy="rules", parallelism={"tp": 2},
                   runtime_python=real_runtime)
    run = Run(spec, new_run_id("tinyvl"), Settings(runs_dir=tmp_path / "runs", runtime_python=real_runtime),
              policy=RulesPolicy())
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["exit_status"] == "needs_accelerator", out.get("exit_detail")
    plan, gates = out["plan"], out["gates"]
    assert {r: m["model_id"] for r, m in plan["components"].items()} == {
        "vision_encoder": "qwen2vit", "vision_projector": "lnmlp", "text_decoder": "qwen2_5_lm"}
    assert plan["similar_case"] == "examples/qwen2.5vl" and plan["converter"] == "Qwen2_5_VLConverter"
    for slot in ("G1", "G2", "G3"):
        assert gates[slot]["passed"], (slot, gates[slot]["summary"])
    assert "all identical" in gates["G1"]["summary"] and "torch_npu" in json.dumps(gates["G1"]["evidence"])
    assert "tp 2" in gates["G4"]["needs_accelerator"]
