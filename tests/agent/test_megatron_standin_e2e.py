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


def test_new_encoder_registered_for_a_clip_tower(tmp_path, tmp_path_factory):
    """LLaVA's CLIP tower on the stand-in (only Qwen-style towers registered): the plan finds no registered class
    that builds it, the model phase registers llava_vit (module + registry + layer-spec entries, committed on the
    run's branch), the model JSON selects it, G1 imports it and G3 sees it registered; tp=2 ends
    needs_accelerator, and the report says which converter evidence is missing."""
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.megatron_standin import write_megatron_standin

    source = build_source("llava", tmp_path_factory.mktemp("src") / "llava")
    target = write_megatron_standin(tmp_path / "MindSpeed-MM", with_assets=False)
    run, out = drive(source, target, "tinyllava", tmp_path)
    assert out["exit_status"] == "needs_accelerator", out.get("exit_detail")
    plan = out["plan"]
    enc = plan["components"]["vision_encoder"]
    assert enc["model_id"] == "llava_vit" and enc["closest"] == "qwen2vit"
    assert "patch_embed: source 'conv2d', component 'conv3d'" in enc["missing"]
    for slot in ("G1", "G2", "G3"):
        assert out["gates"][slot]["passed"], (slot, out["gates"][slot].get("summary"))
    assert "'image_encoder.vision_encoder': 'llava_vit'" in out["gates"]["G3"]["summary"]
    assert out["gates"]["G1"]["converter_used"] == "msmigrate"  # no llava converter in the target: said so
    # the new encoder's own layout: msmigrate's converter derived from the class's state_dict ran on the tower
    assert out["gates"]["G1"]["encoder_converter_used"] == "msmigrate_encoder:llava_vit"
    assert "new llava_vit converter (msmigrate's, derived from the class's state_dict)" in out["gates"]["G1"]["summary"]
    assert "(strict load) -> HF, all identical" in out["gates"]["G1"]["summary"]
    assert any(n.endswith("post_layernorm.weight") for n in out["gates"]["G1"]["encoder_unmapped_hf"])
    assert "new llava_vit builds by model_id and runs a forward: output [32, 32]" in out["gates"]["G1"]["summary"]
    repo = git.Repo(target)
    branch = run.ctx.work_branch
    files = repo.git.diff("--name-only", f"master...{branch}").split()
    assert plan["new_component"]["module_path"] in files
    assert {"mindspeed_mm/models/vision/vision_model.py",
            "mindspeed_mm/models/common/module_spec/get_layer_spec.py"} <= set(files)
    model = json.loads(repo.git.show(f"{branch}:{plan['model_json_path']}"))
    assert model["image_encoder"]["vision_encoder"]["model_id"] == "llava_vit"
    assert model["image_encoder"]["vision_encoder"]["num_positions"] == 17
    # LLaVA's linear-GELU-linear projector is the stand-in's `mlp` by what the class builds, not the `lnmlp` the
    # closest encoder's example pairs with; its inner width is the source's first matrix's output (the LLM width)
    proj = model["image_encoder"]["vision_projector"]
    assert plan["components"]["vision_projector"]["model_id"] == proj["model_id"] == "mlp"
    assert (proj["input_size"], proj["ffn_hidden_size"], proj["hidden_size"]) == (32, 64, 64)
    report = (run.run_dir / "verification_report.md").read_text()
    assert "**new** `llava_vit` registered by this run" in report and "computes what the source's tower" in report
    assert "G1 converted the source's tower with msmigrate's converter" in report and "are dropped" in report
    from msmigrate.faces.eval.scorers import score_run_dir

    score = score_run_dir(run.run_dir, {"backend": "megatron", "exit_status": "needs_accelerator",
                                        "new_component": "llava_vit", "components": "vision_encoder=llava_vit"})
    assert score.passed, [(c.name, c.detail) for c in score.checks if not c.passed]
    assert {"new_component_registered", "edits_in_scope"} <= {c.name for c in score.checks}


def test_new_projector_registered_for_a_pooled_projector(tmp_path, tmp_path_factory):
    """Gemma 3 on the stand-in: no registered projector builds its (norm, one bare matrix, average pool from 16
    patches to 4 tokens), so the run writes gemma3_projector next to the new gemma3_vit, both registered in the
    same registry file (lines added only); G1 converts the projector's weights (strict load, round trip) and runs
    images -> gemma3_vit -> gemma3_projector to the text decoder's width; tp=2 ends needs_accelerator."""
    from msmigrate.faces.eval.scorers import score_run_dir
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.megatron_standin import write_megatron_standin

    source = build_source("gemma3", tmp_path_factory.mktemp("src") / "gemma3")
    target = write_megatron_standin(tmp_path / "MindSpeed-MM", with_assets=False)
    run, out = drive(source, target, "tinygemma", tmp_path)
    assert out["exit_status"] == "needs_accelerator", out.get("exit_detail")
    plan = out["plan"]
    proj = plan["components"]["vision_projector"]
    assert proj["model_id"] == "gemma3_projector" and proj["closest"] == "lnmlp"
    assert "pooling: source True, component False" in proj["missing"]
    g1 = out["gates"]["G1"]
    assert g1["passed"] and g1["projector_converter_used"] == "msmigrate_projector:gemma3_projector"
    assert "2 of 2 HF projector tensors -> 2 Gemma3Projector tensors (strict load" in g1["summary"]
    assert "images -> gemma3_vit [32, 32] -> new gemma3_projector [8, 64]" in g1["summary"]
    assert "'image_encoder.vision_projector': 'gemma3_projector'" in out["gates"]["G3"]["summary"]
    repo = git.Repo(target)
    branch = run.ctx.work_branch
    registry = repo.git.show(f"{branch}:mindspeed_mm/models/vision/vision_model.py")
    assert '"gemma3_vit": Gemma3ViT' in registry and '"gemma3_projector": Gemma3Projector' in registry
    model = json.loads(repo.git.show(f"{branch}:{plan['model_json_path']}"))
    assert model["image_encoder"]["vision_projector"]["model_id"] == "gemma3_projector"
    assert model["image_encoder"]["vision_projector"]["pool"] == 4
    report = (run.run_dir / "verification_report.md").read_text()
    assert "**new** `gemma3_projector` registered by this run" in report
    score = score_run_dir(run.run_dir, {"backend": "megatron", "exit_status": "needs_accelerator",
                                        "new_component": "gemma3_vit", "new_projector": "gemma3_projector",
                                        "components": "vision_projector=gemma3_projector"})
    assert score.passed, [(c.name, c.detail) for c in score.checks if not c.passed]
