"""The Megatron route end to end on the Megatron stand-in: a spec with tp=2 for the tiny Qwen2.5-VL fixture runs
prepare → plan (components matched by model_id against the stand-in's registries and example) → model / data /
config phases (rules policy, real tools) → the route's static gates (real: MEGATRON_GATES, as build_gates wires
them) → the training slot,
which cannot run tp=2 on this machine → exit needs_accelerator, and the eval scorer agrees.

A slot the route's gate table does not fill yet is filled here by a labelled stand-in record (``TEST-ONLY``), so
that the test exercises every real gate that exists; the assertions name which gates were real."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import git
import pytest

from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.gates import MEGATRON_GATES
from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.agent.policies.rules import RulesPolicy
from msmigrate.agent.runner import Run, new_run_id

pytestmark = pytest.mark.integration


def placeholder(slot: str):
    def gate(deps, state):
        if slot in ("G4", "G5", "G6"):
            return {"gate": slot, "passed": False, "summary": "TEST-ONLY: training slot not built yet",
                    "evidence": [], "failure_text": "", "needs_accelerator": "TEST-ONLY: tp=2 training needs an "
                    "accelerator (the route's training gate is not built yet)"}
        ev = evidence_item(f"TEST-ONLY {slot}", ["true"], 0, 0.0, 0.0, "placeholder", {})
        return {"gate": slot, "passed": True, "summary": f"TEST-ONLY {slot} placeholder", "evidence": [ev]}

    return gate


def test_tp2_on_the_megatron_standin(tmp_path, source_model_qwen2_5):
    from msmigrate.testbeds.megatron_standin import write_megatron_standin

    target = write_megatron_standin(tmp_path / "MindSpeed-MM", with_assets=False)
    real = sorted(MEGATRON_GATES)
    missing = {s: placeholder(s) for s in ("G1", "G2", "G3", "G4", "G5", "G6") if s not in MEGATRON_GATES}
    from msmigrate.agent.backend_route import route_gates
    from msmigrate.agent.gates import GATES

    gates = route_gates(GATES, {**MEGATRON_GATES, **missing})
    spec = RunSpec(source=source_model_qwen2_5, target=target, model_name="tinyvl", policy="rules",
                   parallelism={"tp": 2})
    settings = Settings(runs_dir=tmp_path / "runs", runtime_python=sys.executable)
    run = Run(spec, new_run_id("tinyvl"), settings, policy=RulesPolicy(), gates=gates)
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["exit_status"] == "needs_accelerator", out.get("exit_detail")
    plan = out["plan"]
    assert plan["backend"] == "megatron" and plan["similar_case"] == "examples/qwen2.5vl"
    assert {r: m["model_id"] for r, m in plan["components"].items()} == {
        "vision_encoder": "qwen2vit", "text_decoder": "qwen2_5_lm", "vision_projector": "lnmlp"}
    assert any(r.startswith("registered ids:") for r in plan["reasons"])
    for slot in real:  # the route's real static gates passed on their own evidence
        rec = out["gates"][slot]
        assert rec["passed"] and rec.get("backend") == "megatron", (slot, rec.get("summary"))
    repo = git.Repo(target)
    model = json.loads(repo.git.show(f"{run.ctx.work_branch}:{plan['model_json_path']}"))
    assert model["text_decoder"]["num_layers"] == 2
    from msmigrate.faces.eval.scorers import score_run_dir

    score = score_run_dir(run.run_dir, {"backend": "megatron", "exit_status": "needs_accelerator",
                                        "components": "vision_encoder=qwen2vit,text_decoder=qwen2_5_lm"})
    assert score.passed, [(c.name, c.detail) for c in score.checks if not c.passed]


@pytest.fixture(scope="module")
def source_model_qwen2_5(tmp_path_factory) -> Path:
    from msmigrate.testbeds.fixtures import build_source

    return build_source("qwen2_5_vl", tmp_path_factory.mktemp("src") / "qwen2_5_vl")
