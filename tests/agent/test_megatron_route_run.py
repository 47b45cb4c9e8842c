"""A Megatron-route run through the whole graph with the real rules policy and tools (fake gates): tp=2 on a
Megatron-shaped target → plan (components by model_id, from the target's example) → model / data / config phases
write the model JSON, data JSON and launch script → the training slot needs an accelerator → exit
``needs_accelerator``, and the report lists what was not proven."""

from __future__ import annotations

import json
import time
from pathlib import Path

import git

from agent_fakes import FakeGates, make_run
from msmigrate.agent.policies.rules import RulesPolicy
from msmigrate.agent.runner import build_tools

EXAMPLE_MODEL = {
    "model_id": "refvl", "img_context_token_id": 1,
    "image_encoder": {
        "vision_encoder": {"model_id": "ref_vit", "num_layers": 8, "hidden_size": 128, "num_attention_heads": 4,
                           "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                           "pipeline_num_layers": [8]},
        "vision_projector": {"model_id": "ref_mlp", "input_size": 128, "hidden_size": 256, "ffn_hidden_size": 512}},
    "text_decoder": {"model_id": "ref_lm", "num_layers": 8, "hidden_size": 256, "num_attention_heads": 8,
                     "num_query_groups": 8, "vocab_size": 5000, "mrope_section": [1, 1, 2],
                     "pipeline_num_layers": [8]},
}
EXAMPLE_DATA = {"dataset_param": {"dataset_type": "huggingface",
                                  "preprocess_parameters": {"model_name_or_path": "./ckpt/hf_path/refvl"},
                                  "basic_parameters": {"template": "qwen2vl", "dataset": "./data/x.json"}},
                "dataloader_param": {"collate_param": {"model_name": "qwen2vl"}}}
SCRIPT = """#!/bin/bash
NPUS_PER_NODE=8
NNODES=1
MM_DATA="./examples/refvl/data_refvl.json"
MM_MODEL="./examples/refvl/model_refvl.json"
LOAD_PATH="ckpt/mm_path/refvl"
TP=1
PP=1
CP=1
MBS=1
GRAD_ACC_STEP=16
GPT_ARGS="
    --tensor-model-parallel-size ${TP} \\
    --pipeline-model-parallel-size ${PP} \\
    --vocab-size 5000 \\
"
torchrun pretrain_vlm.py $GPT_ARGS --mm-model $MM_MODEL --mm-data $MM_DATA
"""
VLM = '''class VLMModel:
    def forward(self, input_ids, pixel_values=None, image_grid_thw=None, attention_mask=None, labels=None, **kwargs):
        return {}
'''


def megatron_target(base: Path, dest: Path) -> Path:
    """The agent stand-in plus what the Megatron route reads: the entry point, the assembly and one example."""
    import shutil

    shutil.copytree(base, dest, ignore=shutil.ignore_patterns(".git"))
    (dest / "pretrain_vlm.py").write_text("# entry point of the Megatron route\n")
    (dest / "mindspeed_mm/models").mkdir(parents=True, exist_ok=True)
    (dest / "mindspeed_mm/models/vlm_model.py").write_text(VLM)
    ex = dest / "examples/refvl"
    ex.mkdir(parents=True)
    (ex / "model_refvl.json").write_text(json.dumps(EXAMPLE_MODEL))
    (ex / "data_refvl.json").write_text(json.dumps(EXAMPLE_DATA))
    (ex / "finetune_refvl.sh").write_text(SCRIPT)
    repo = git.Repo.init(dest)
    repo.git.add(A=True)
    repo.index.commit("base")
    return dest


def accelerator_gate(deps, state):
    return {"gate": "G4", "passed": False, "summary": "not run: no accelerator", "evidence": [],
            "needs_accelerator": "pretrain_vlm.py training needs megatron-core on an NPU/GPU", "failure_text": ""}


class RouteGates(FakeGates):
    """G1..G3 pass (fake, recorded); the training slot is the accelerator-only one."""

    def as_dict(self):
        return {**super().as_dict(), "G4": accelerator_gate}


def test_tp2_run_writes_the_route_files_and_exits_needs_accelerator(fast_prepare, tmp_path):
    target = megatron_target(fast_prepare["target"], tmp_path / "mm")
    fakes = RouteGates()
    run = make_run({**fast_prepare, "target": target}, tmp_path, RulesPolicy(), fakes, tools=build_tools,
                   parallelism={"tp": 2})
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["exit_status"] == "needs_accelerator", out.get("exit_detail")
    assert fakes.calls == ["G1", "G2", "G3"]
    plan = out["plan"]
    assert plan["backend"] == "megatron" and plan["similar_case"] == "examples/refvl"
    assert {r: m["model_id"] for r, m in plan["components"].items()} == {
        "vision_encoder": "ref_vit", "text_decoder": "ref_lm", "vision_projector": "ref_mlp"}
    assert plan["batch_contract"]["consumed"] and "pixel_values" in plan["batch_contract"]["consumed"]
    repo = git.Repo(target)
    branch = run.ctx.work_branch
    model = json.loads(repo.git.show(f"{branch}:{plan['model_json_path']}"))
    dec = model["text_decoder"]
    assert dec["num_layers"] == 2 and dec["num_query_groups"] == 2 and dec["pipeline_num_layers"] == [2]
    script = repo.git.show(f"{branch}:{plan['script_path']}")
    assert "TP=2" in script and f'MM_MODEL="./{plan["model_json_path"]}"' in script
    data = json.loads(repo.git.show(f"{branch}:{plan['data_json_path']}"))
    assert data["dataset_param"]["preprocess_parameters"]["model_name_or_path"] == str(fast_prepare["source"])
    report = (run.run_dir / "verification_report.md").read_text()
    assert "## Megatron route" in report and "What this run could not prove" in report
    assert "G4: pretrain_vlm.py training needs megatron-core" in report
    assert "reuse `ref_vit`" in report
    assert "| G4 | functional training (pretrain_vlm.py steps; accelerator) | NEEDS ACCELERATOR |" in report
    # the eval scorer reads the same run from its folder and the target's history alone
    from msmigrate.faces.eval.scorers import score_run_dir

    want = {"backend": "megatron", "components": "vision_encoder=ref_vit,text_decoder=ref_lm",
            "exit_status": "needs_accelerator"}
    score = score_run_dir(run.run_dir, want)
    assert score.passed, [(c.name, c.detail) for c in score.checks if not c.passed]
    assert {c.name for c in score.checks} >= {"static_gates_green", "honest_exit", "delivered_files"}
    wrong = score_run_dir(run.run_dir, {**want, "components": "vision_encoder=other_vit"})
    assert not wrong.passed and not next(c for c in wrong.checks if c.name == "expected_components").passed
