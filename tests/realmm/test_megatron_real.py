"""The Megatron route's tools on the real snapshot, in the real runtime (torch 2.7.1 + transformers 4.57):
the real Qwen2.5-VL converter round trip on a tiny model, its layout equal to the stand-in converter's, the entry's
imports (which fail here for want of torch_npu and Megatron-LM: the fact the training gate reports), and the
static config check over the real pretrain_vlm.py examples."""

from __future__ import annotations

import subprocess
import sys

import pytest

from msmigrate.agent.routes.megatron.gates.imports_gate import megatron_imports_record
from msmigrate.tools.megatron.config_check import check_megatron_config, definition_paths
from msmigrate.tools.megatron.converter_roundtrip import target_converter_roundtrip
from msmigrate.tools.megatron.launch_script import parse_launch_script

pytestmark = pytest.mark.realmm

# A tiny Qwen2.5-VL (our numbers, the architecture's fields): 4 query heads over 2 KV groups, 2+2 layers.
TINY_QWEN2_5_VL = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
    "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
    "num_hidden_layers": 2, "vocab_size": 256, "max_position_embeddings": 512, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "tie_word_embeddings": False, "torch_dtype": "float32",
    "image_token_id": 250, "video_token_id": 251, "vision_start_token_id": 248, "vision_end_token_id": 249,
    "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
    "vision_config": {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "in_chans": 3,
                      "out_hidden_size": 64, "patch_size": 2, "spatial_merge_size": 2, "temporal_patch_size": 2,
                      "window_size": 8, "fullatt_block_indexes": [1], "tokens_per_second": 2}}

STANDIN_LAYOUT = """
import json, sys, torch
from types import SimpleNamespace as NS
from checkpoint.vlm_model.converters.qwen2_5vl import Qwen2_5_VLConverter
cfg = NS(mm_dir=sys.argv[2], hf_config=NS(hf_dir=sys.argv[1]),
         parallel_config=NS(llm_pp_layers=[[2]], vit_pp_layers=[[2]], tp_size=1))
Qwen2_5_VLConverter.hf_to_mm(cfg)
sd = torch.load(sys.argv[2] + "/release/mp_rank_00/model_optim_rng.pt", weights_only=False)["model"]
print(json.dumps({k: list(v.shape) for k, v in sd.items()}))
"""


@pytest.fixture(scope="module")
def real_roundtrip(realmm_snapshot, real_runtime, tmp_path_factory):
    work = tmp_path_factory.mktemp("mconv")
    res = target_converter_roundtrip(real_runtime, realmm_snapshot / "MindSpeed-MM", "Qwen2_5_VLConverter", work,
                                     tiny_config=TINY_QWEN2_5_VL, extra_paths=[realmm_snapshot / "MindSpeed"])
    return res, work


def test_real_converter_round_trip(real_roundtrip):
    res, _ = real_roundtrip
    assert res.error is None, (res.error, res.facts)
    assert res.ok, res.problems
    assert res.ran == ["Qwen2_5_VLConverter.hf_to_mm(ConvertVppMMConfigQwen2_5)",
                       "Qwen2_5_VLConverter.mm_to_hf(ConvertHFConfigQwen2_5)"]
    # load_from_mm imports mindspeed.megatron_adaptor -> torch_npu: stubbed, and said so
    assert len(res.stubbed) == 1 and "torch_npu" in res.stubbed[0]
    assert res.facts["hf_tensors"] == 57 and res.facts["megatron_tensors"] == 43
    assert res.facts["qkv_layers_checked"] == 2


def test_real_converter_tp2_pp2(realmm_snapshot, real_runtime, real_roundtrip, tmp_path):
    _, work = real_roundtrip
    res = target_converter_roundtrip(real_runtime, realmm_snapshot / "MindSpeed-MM", "Qwen2_5_VLConverter", tmp_path,
                                     hf_dir=work / "hf", tp=2, llm_pp_layers=[[1, 1]], vit_pp_layers=[[2, 0]],
                                     extra_paths=[realmm_snapshot / "MindSpeed"])
    assert res.ok, (res.error, res.problems)
    assert res.facts["megatron_files"] == 4  # mp_rank_{00,01}_{000,001}
    # the real converter's TP split: each rank's shard holds its whole KV groups in per-group order, every layer
    assert res.facts["qkv_layers_checked"] == 2


def test_real_converter_pp2_checks_the_qkv_order_on_every_stage(realmm_snapshot, real_runtime, real_roundtrip,
                                                               tmp_path):
    """pp=2 without explicit lists: the text layers spread over the stages, the encoder on the first (as the real
    examples place it); at tp=1 each stage's layers, put back at their global index, have the per-group qkv order."""
    _, work = real_roundtrip
    res = target_converter_roundtrip(real_runtime, realmm_snapshot / "MindSpeed-MM", "Qwen2_5_VLConverter", tmp_path,
                                     hf_dir=work / "hf", pp=2, extra_paths=[realmm_snapshot / "MindSpeed"])
    assert res.ok, (res.error, res.problems)
    assert res.facts["megatron_files"] == 2 and res.facts["qkv_layers_checked"] == 2
    assert res.facts["llm_pp_layers"] == [[1, 1]] and res.facts["vit_pp_layers"] == [[2, 0]]


def test_standin_converter_writes_the_real_layout(real_roundtrip, real_runtime, tmp_path):
    """Same HF folder (written by the real runtime's transformers) through both converters: the same Megatron
    tensor names and shapes."""
    import torch

    _, work = real_roundtrip
    real = torch.load(work / "mm/release/mp_rank_00/model_optim_rng.pt", map_location="cpu", weights_only=False)
    real = {k: list(v.shape) for k, v in real["model"].items() if isinstance(v, torch.Tensor)}
    from msmigrate.testbeds.megatron_standin import write_megatron_standin

    root = write_megatron_standin(tmp_path / "s", git_init=False, with_assets=False)
    out = subprocess.run([sys.executable, "-c", STANDIN_LAYOUT, str(work / "hf"), str(tmp_path / "mm")], cwd=root,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    import json

    assert json.loads(out.stdout.strip().splitlines()[-1]) == real


def test_real_entry_imports_need_the_accelerator_stack(realmm_snapshot, real_runtime):
    rec = megatron_imports_record(real_runtime, realmm_snapshot / "MindSpeed-MM")
    assert not rec["passed"] and rec["needs_accelerator"], rec["summary"]
    assert "megatron" in rec["missing_modules"], rec["missing_modules"]  # Megatron-LM is not installed here
    assert "needs the accelerator environment" in rec["summary"]


def test_real_examples_pass_the_static_config_check(realmm_snapshot, tmp_path):
    mm = realmm_snapshot / "MindSpeed-MM"
    defs = definition_paths(mm, [realmm_snapshot / "MindSpeed"])
    checked = 0
    for sh in sorted((mm / "examples").rglob("*.sh")):
        launch = parse_launch_script(sh.read_text(errors="replace"))
        if launch.entry != "pretrain_vlm.py" or not isinstance(launch.flags.get("--mm-model"), str):
            continue
        res = check_megatron_config(mm, launch.flags["--mm-model"], sh.relative_to(mm), definitions=defs)
        assert res.error is None and res.ok, (sh, res.problems)
        checked += 1
    assert checked >= 5
    # a real model JSON with its PP sizes broken is caught: qwen2.5vl 7b runs pp=2 with [12, 16]
    script = mm / "examples/qwen2.5vl/finetune_qwen2_5_vl_7b.sh"
    assert "PP=2" in script.read_text()
    bad = tmp_path / "finetune_bad.sh"  # outside the shared snapshot; its relative JSON paths still resolve in mm
    bad.write_text(script.read_text().replace("PP=2", "PP=4"))
    res = check_megatron_config(mm, "examples/qwen2.5vl/model_7b.json", bad, definitions=defs)
    assert any("has 2 stage(s), the script has pp=4" in p for p in res.problems), res.problems


def test_real_converter_on_the_shrunk_source_config(realmm_snapshot, real_runtime, tmp_path):
    """The gate's default input: the source's own config.json, 2 layers per stack, 512 vocabulary."""
    import json

    source = tmp_path / "source"
    source.mkdir()
    big = {**TINY_QWEN2_5_VL, "num_hidden_layers": 6, "vocab_size": 4096,
           "vision_config": {**TINY_QWEN2_5_VL["vision_config"], "depth": 5, "fullatt_block_indexes": [2, 4]}}
    (source / "config.json").write_text(json.dumps(big))
    res = target_converter_roundtrip(real_runtime, realmm_snapshot / "MindSpeed-MM", "Qwen2_5_VLConverter",
                                     tmp_path / "w", shrink_source=source, extra_paths=[realmm_snapshot / "MindSpeed"])
    assert res.ok, (res.error, res.problems)
    assert res.facts["llm_pp_layers"] == [[2]] and res.facts["vit_pp_layers"] == [[2]]
    assert res.facts["qkv_layers_checked"] == 2
