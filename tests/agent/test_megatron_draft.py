"""Drafts of the Megatron route's files: layers over pipeline stages in the framework's layout, source sizes into
the fields the example's sections have, the launch script's sizes and batch arithmetic."""

from __future__ import annotations

from msmigrate.agent.routes.megatron.draft import draft_data_json, draft_launch_script, draft_model_json, stage_layers
from msmigrate.agent.routes.megatron.components import script_assets

EXAMPLE = {
    "model_id": "vlm", "img_context_token_id": 7,
    "image_encoder": {
        "vision_encoder": {"model_id": "enc", "num_layers": 32, "hidden_size": 1280, "num_attention_heads": 16,
                           "spatial_merge_size": 2, "pipeline_num_layers": [32], "llm_hidden_size": 2048},
        "vision_projector": {"model_id": "proj", "input_size": 1280, "hidden_size": 2048, "ffn_hidden_size": 5120}},
    "text_decoder": {"model_id": "dec", "num_layers": 36, "hidden_size": 2048, "num_attention_heads": 16,
                     "num_query_groups": 2, "group_query_attention": True, "vocab_size": 151936,
                     "untie_embeddings_and_output_weights": False, "pipeline_num_layers": [36]},
}
CFG = {"image_token_id": 99,
       "vision_config": {"depth": 2, "hidden_size": 32, "num_heads": 2, "spatial_merge_size": 2,
                         "brand_new_feature": [1]},
       "text_config": {"num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
                       "num_key_value_heads": 4, "vocab_size": 1000, "tie_word_embeddings": False}}
COMPONENTS = {"vision_encoder": {"model_id": "enc"}, "vision_projector": {"model_id": "proj"},
              "text_decoder": {"model_id": "dec"}}


def test_stage_layers_layouts():
    assert stage_layers(8, 2, 1) == [4, 4]
    assert stage_layers(8, 2, 2) == [[2, 2], [2, 2]]
    assert stage_layers(3, 2, 1, first_stage_only=True) == [3, 0]
    assert stage_layers(3, 2, 2, first_stage_only=True) == [[3, 0], [0, 0]]


def test_model_json_takes_source_sizes_into_existing_fields():
    d = draft_model_json(EXAMPLE, CFG, COMPONENTS, {"tp": 2, "pp": 2, "vpp": 1})
    doc = d.text
    dec, enc = doc["text_decoder"], doc["image_encoder"]["vision_encoder"]
    proj = doc["image_encoder"]["vision_projector"]
    assert doc["img_context_token_id"] == 99
    assert dec["num_layers"] == 4 and dec["pipeline_num_layers"] == [2, 2] and dec["num_query_groups"] == 4
    assert dec["group_query_attention"] is False  # 4 heads, 4 KV heads: plain multi-head attention
    assert dec["untie_embeddings_and_output_weights"] is True and dec["vocab_size"] == 1000
    assert enc["num_layers"] == 2 and enc["pipeline_num_layers"] == [2, 0] and enc["llm_hidden_size"] == 64
    # the example's projector inner width is input x merge^2; the draft keeps that relation
    assert (proj["input_size"], proj["hidden_size"], proj["ffn_hidden_size"]) == (32, 64, 128)
    assert "brand_new_feature" not in enc and "vision_encoder.brand_new_feature" in d.unmapped
    assert EXAMPLE["text_decoder"]["num_layers"] == 36  # the example is not mutated


SCRIPT = """#!/bin/bash
NPUS_PER_NODE=8
NNODES=1
MM_DATA="./examples/x/data.json"
MM_MODEL="./examples/x/model.json"
LOAD_PATH="ckpt/x"
TP=1
PP=1
CP=1
MBS=1
GRAD_ACC_STEP=32
DP=$(($WORLD_SIZE/$TP/$PP/$CP))
GPT_ARGS="
    --tensor-model-parallel-size ${TP} \\
    --pipeline-model-parallel-size ${PP} \\
    --vocab-size 151936 \\
"
torchrun $DISTRIBUTED_ARGS pretrain_vlm.py $GPT_ARGS --mm-model $MM_MODEL
"""
PLAN = {"parallel": {"tp": 2, "pp": 2, "cp": 1, "vpp": 2}, "model_json_path": "examples/m/model_m.json",
        "data_json_path": "examples/m/data_m.json", "converter_output": "ckpt/mm_path/m", "text_layers": 8}


def test_launch_script_sets_sizes_paths_and_vpp():
    d = draft_launch_script(SCRIPT, PLAN, 4, 1, 2, None, 1000)
    assert not d.unmapped
    for line in ("TP=2", "PP=2", "GRAD_ACC_STEP=2", "NPUS_PER_NODE=4", 'MM_MODEL="./examples/m/model_m.json"',
                 "--vocab-size 1000", "--virtual-pipeline-model-parallel-size 2"):
        assert line in d.text
    # MindSpeed-MM's validate_args patch rejects the per-stage layer count flag (uneven VPP stages instead)
    assert "--num-layers-per-virtual-pipeline-stage" not in d.text
    assert script_assets(d.text) == {"model": "examples/m/model_m.json", "data": "examples/m/data_m.json"}


def test_launch_script_of_another_shape_is_reported():
    d = draft_launch_script("torchrun pretrain_vlm.py --tensor-model-parallel-size 1\n", PLAN, 4, 1, 2, None, None)
    assert "variable TP not in the example script" in d.unmapped


def test_data_json_points_at_the_source():
    ex = {"dataset_param": {"preprocess_parameters": {"model_name_or_path": "./ckpt/hf"},
                            "basic_parameters": {"dataset": "./data/x.json", "template": "t", "cache_dir": "c"}}}
    d = draft_data_json(ex, "/src", "/src/data/train.json", None)
    basic = d.text["dataset_param"]["basic_parameters"]
    assert d.text["dataset_param"]["preprocess_parameters"]["model_name_or_path"] == "/src"
    assert basic["dataset"] == "/src/data/train.json" and basic["dataset_dir"] == "/src/data"
    assert basic["template"] == "t"


def test_vit_width_is_embed_dim_when_the_source_has_both():
    cfg = {"vision_config": {"depth": 2, "embed_dim": 32, "hidden_size": 64, "num_heads": 2},
           "text_config": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4}}
    d = draft_model_json(EXAMPLE, cfg, COMPONENTS, {"tp": 1, "pp": 1, "vpp": 1})
    assert d.text["image_encoder"]["vision_encoder"]["hidden_size"] == 32


def test_config_check_reads_the_vit_width_the_same_way(tmp_path):
    from msmigrate.tools.megatron.config_check import _check_source

    model = {"image_encoder": {"vision_encoder": {"num_layers": 2, "hidden_size": 32, "num_attention_heads": 2}}}
    problems: list[str] = []
    _check_source(model, {"vision_config": {"depth": 2, "embed_dim": 32, "hidden_size": 64, "num_heads": 2}},
                  problems)
    assert problems == []


def test_numerics_follow_the_source_not_the_example(source_model):
    """A Qwen2-VL source (real tiny model: LayerNorm, quick_gelu, fc1/fc2) drafted from an example section holding a
    Qwen2.5-VL tower's numerics: each field the section has is set from the source's config and weights; a field it
    lacks is not invented."""
    import json

    from msmigrate.tools.megatron.encoder_structure import weight_shapes

    example = json.loads(json.dumps(EXAMPLE))
    example["image_encoder"]["vision_encoder"].update(normalization="RMSNorm", activation_func="silu",
                                                      gated_linear_unit=True)
    cfg = json.loads((source_model / "config.json").read_text())
    d = draft_model_json(example, cfg, COMPONENTS, {"tp": 1, "pp": 1, "vpp": 1}, weight_shapes(source_model))
    enc = d.text["image_encoder"]["vision_encoder"]
    assert (enc["normalization"], enc["activation_func"], enc["gated_linear_unit"]) == ("LayerNorm", "quick_gelu",
                                                                                        False)
    assert "add_bias_linear" not in enc
    assert any(c.startswith("vision_encoder.normalization = 'LayerNorm' (source ") for c in d.changes), d.changes
    # without the weights only the config's activation can be followed
    d = draft_model_json(example, cfg, COMPONENTS, {"tp": 1, "pp": 1, "vpp": 1})
    enc = d.text["image_encoder"]["vision_encoder"]
    assert enc["activation_func"] == "quick_gelu" and enc["normalization"] == "RMSNorm"


def test_mrope_section_fitted_to_a_one_d_rotary_source():
    """An mrope decoder reused for a 1-D rotary source: the example's sections keep their proportions but split the
    source's head_dim / 2 frequencies (the real mrope splits the rotary table by them and refuses other sums)."""
    from msmigrate.agent.routes.megatron.draft import _fit_mrope_section

    node, changes = {"mrope_section": [16, 24, 24]}, []
    _fit_mrope_section(node, {"num_attention_heads": 4, "hidden_size": 64}, changes)
    assert node["mrope_section"] == [2, 3, 3] and "head_dim 16 has 8" in changes[0]
    node = {"mrope_section": [16, 24, 24]}
    _fit_mrope_section(node, {"num_attention_heads": 28, "hidden_size": 3584}, changes)
    assert node["mrope_section"] == [16, 24, 24]  # already the source's 64: unchanged
