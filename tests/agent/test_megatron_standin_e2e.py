"""The Megatron route end to end on the Megatron stand-in: a spec with tp=2 for the tiny Qwen2.5-VL fixture runs
prepare → plan (components matched by model_id against the stand-in's registries and example) → model / data /
config phases (rules policy, real tools) → the route's static gates G1-G3 (the real MEGATRON_GATES that
build_gates wires) → the training slot, which does not launch tp=2 on a CPU runtime → exit needs_accelerator, and
the eval scorer agrees.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import git
import pytest

from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.policies.rules import RulesPolicy
from msmigrate.agent.runner import Run, new_run_id

pytestmark = pytest.mark.integration


def drive(source: Path, target: Path, name: str, tmp_path: Path) -> tuple[Run, dict]:
    """One rules-policy run at tp=2 with the real gate tables (build_gates())."""
    spec = RunSpec(source=source, target=target, model_name=name, policy="rules", parallelism={"tp": 2})
    run = Run(spec, new_run_id(name), Settings(runs_dir=tmp_path / "runs", runtime_python=sys.executable),
              policy=RulesPolicy())
    try:
        return run, run.drive()
    finally:
        run.close()


def test_tp2_on_the_megatron_standin(tmp_path, source_model_qwen2_5):
    from msmigrate.testbeds.megatron_standin import write_megatron_standin

    target = write_megatron_standin(tmp_path / "MindSpeed-MM", with_assets=False)
    run, out = drive(source_model_qwen2_5, target, "tinyvl", tmp_path)
    assert out["exit_status"] == "needs_accelerator", out.get("exit_detail")
    plan = out["plan"]
    assert plan["backend"] == "megatron" and plan["similar_case"] == "examples/qwen2.5vl"
    assert {r: m["model_id"] for r, m in plan["components"].items()} == {
        "vision_encoder": "qwen2vit", "text_decoder": "qwen2_5_lm", "vision_projector": "lnmlp"}
    assert any(r.startswith("registered ids:") for r in plan["reasons"])
    for slot in ("G1", "G2", "G3"):  # the route's static gates passed on their own evidence
        rec = out["gates"][slot]
        assert rec["passed"] and rec.get("backend") == "megatron", (slot, rec.get("summary"))
    assert out["gates"]["G1"]["converter_used"] == "target"  # the stand-in's own Qwen2_5_VLConverter ran
    assert "2 file(s), tp=2" in out["gates"]["G1"]["summary"]  # at the launch's TP: the shards it would load
    g4 = out["gates"]["G4"]
    assert not g4["passed"] and "tp 2" in g4["needs_accelerator"] and "G5" not in out["gates"]
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


def test_llava_stops_where_no_registered_decoder_computes_its_language_model(tmp_path, tmp_path_factory):
    """LLaVA on the stand-in (only a Qwen-style decoder registered): the plan designs llava_vit for the CLIP tower no
    registered class builds, but its LLaMA language model has no q/k/v bias, while every example of qwen2_5_lm fixes
    add_qkv_bias true (its mrope alone would not differ): the decoder is not reused, and the run stops before
    writing anything, naming the facts that differ (the new-encoder path itself: test_megatron_new_component.py)."""
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.megatron_standin import write_megatron_standin

    source = build_source("llava", tmp_path_factory.mktemp("src") / "llava")
    target = write_megatron_standin(tmp_path / "MindSpeed-MM", with_assets=False)
    run, out = drive(source, target, "tinyllava", tmp_path)
    assert out["exit_status"] == "unsupported_by_policy", out.get("exit_detail")
    plan = out["plan"]
    enc = plan["components"]["vision_encoder"]
    assert enc["model_id"] == "llava_vit" and enc["closest"] == "qwen2vit"
    dec = plan["components"]["text_decoder"]
    assert dec["model_id"] is None and dec["closest"] == "qwen2_5_lm" and "text_decoder" in plan["new_components"]
    assert any(d.startswith("add_qkv_bias: source False") for d in dec["missing"]), dec["missing"]
    # 1-D rotary against mrope is no difference by itself (the same rotary when every axis carries the token index)
    assert not any(d.startswith("position_embedding_type") for d in dec["missing"]), dec["missing"]
    assert "G1" not in out["gates"]
    assert "new Megatron component(s)" in (out.get("exit_detail") or ""), out.get("exit_detail")


def test_gemma3_stops_where_no_registered_decoder_computes_its_language_model(tmp_path, tmp_path_factory):
    """Gemma 3 on the stand-in: the plan designs gemma3_projector (norm, one bare matrix, average pool) next to
    gemma3_vit, but its language model (per-head q/k norms, no q/k/v bias, 1-D rotary) is not what qwen2_5_lm
    computes: the decoder is not reused and the run stops before writing anything."""
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.megatron_standin import write_megatron_standin

    source = build_source("gemma3", tmp_path_factory.mktemp("src") / "gemma3")
    target = write_megatron_standin(tmp_path / "MindSpeed-MM", with_assets=False)
    run, out = drive(source, target, "tinygemma", tmp_path)
    assert out["exit_status"] == "unsupported_by_policy", out.get("exit_detail")
    plan = out["plan"]
    proj = plan["components"]["vision_projector"]
    assert proj["model_id"] == "gemma3_projector" and proj["closest"] == "lnmlp"
    assert "pooling: source True, component False" in proj["missing"]
    dec = plan["components"]["text_decoder"]
    assert dec["model_id"] is None and dec["closest"] == "qwen2_5_lm", dec["why"]
    assert "G1" not in out["gates"]
