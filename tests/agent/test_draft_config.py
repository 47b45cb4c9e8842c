"""The drafted plugin-route YAML: attr read off the sample data, plan/tree entries filled, baseline knobs kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from msmigrate.agent.routes.fsdp2.draft_config import attr_from_samples, draft_config, launch_script, load_baseline


def write_samples(tmp_path: Path, samples) -> Path:
    path = tmp_path / "train.json"
    path.write_text(json.dumps(samples))
    return path


def test_attr_for_openai_style_messages_with_images(tmp_path):
    data = write_samples(tmp_path, [{"messages": [{"role": "user", "content": "<image>hi"},
                                                  {"role": "assistant", "content": "yo"}], "images": ["a.png"]}])
    assert attr_from_samples(data) == {"messages": "messages", "role_tag": "role", "content_tag": "content",
                                       "user_tag": "user", "assistant_tag": "assistant", "images": "images"}


def test_attr_for_sharegpt_conversations_with_videos(tmp_path):
    data = write_samples(tmp_path, [{"conversations": [{"from": "human", "value": "<video>?"},
                                                       {"from": "gpt", "value": "!"}], "videos": ["v.mp4"]}])
    assert attr_from_samples(data) == {"messages": "conversations", "role_tag": "from", "content_tag": "value",
                                       "user_tag": "human", "assistant_tag": "gpt", "videos": "videos"}


def test_attr_of_the_fixture_data(workspace):
    attr = attr_from_samples(workspace["source"] / "data" / "train.json")
    assert attr["messages"] == "messages" and attr["role_tag"] == "role" and attr["images"] == "images"


def test_attr_of_empty_data_defaults_to_messages(tmp_path):
    assert attr_from_samples(write_samples(tmp_path, [])) == {"messages": "messages"}


PLAN = {"model_id": "fakevl", "route": "transformers", "dataset_type": "huggingface", "template": "qwen2vl",
        "collator": "qwen3vl", "plugin_dir": "mindspeed_mm/fsdp/models/fakevl",
        "data_plugin": "mindspeed_mm/fsdp/data/datasets/huggingface"}
TREE = {"names": ["model", "model.layers", "model.layers.0", "model.embed_tokens", "lm_head"],
        "classes": {"model.layers": "ModuleList", "model.layers.0": "DecoderLayer", "model.embed_tokens": "Embedding"},
        "no_split_modules": ["DecoderLayer"], "accepts_past_key_values": {"DecoderLayer": True}}


def test_draft_config_fills_plan_data_and_tree_and_keeps_baseline_knobs(workspace, tmp_path):
    baseline, script, script_path = load_baseline(workspace["target"], "examples/qwen3vl/qwen3vl_config.yaml")
    assert script_path == "examples/qwen3vl/finetune_qwen3vl.sh" and "qwen3vl_config.yaml" in script
    data = workspace["source"] / "data" / "train.json"
    cfg = draft_config(PLAN, baseline, source=workspace["source"], data_json=data, tree=TREE)
    assert cfg["model"]["model_id"] == "fakevl" and cfg["model"]["trust_remote_code"] is False
    assert cfg["model"]["model_name_or_path"] == str(workspace["source"]) and cfg["model"]["freeze"] == []
    ds = cfg["data"]["dataset_param"]
    assert ds["dataset_type"] == "huggingface" and ds["attr"]["images"] == "images"
    assert ds["basic_parameters"]["template"] == "qwen2vl" and ds["basic_parameters"]["dataset"] == str(data)
    assert "chat_template" not in ds["basic_parameters"]
    assert cfg["data"]["dataloader_param"]["collate_param"]["collator_id"] == "qwen3vl"
    assert cfg["parallel"]["fsdp_plan"]["apply_modules"] == ["model.embed_tokens", "model.layers.{*}", "lm_head"]
    assert cfg["features"]["recompute"] is True
    assert cfg["features"]["recompute_plan"]["apply_modules"] == ["model.layers.{*}"]
    assert cfg["training"]["plugin"] == [PLAN["plugin_dir"], PLAN["data_plugin"]]
    # the user's checkpoint: the source's safetensors loaded into the meta-built model (the framework's HF load)
    assert (workspace["source"] / "model.safetensors").is_file()
    assert {k: cfg["training"][k] for k in ("init_model_with_meta_device", "load", "load_format", "no_load_optim",
                                            "no_load_rng")} == {"init_model_with_meta_device": True,
                                                                "load": str(workspace["source"]),
                                                                "load_format": "auto", "no_load_optim": True,
                                                                "no_load_rng": True}
    assert "save" not in cfg["training"]
    # baseline training knobs untouched, and the baseline itself not mutated
    assert cfg["training"]["train_iters"] == baseline["training"]["train_iters"]
    assert baseline["model"]["model_id"] == "qwen3_vl"


def test_the_examples_sample_cap_is_not_delivered(workspace):
    """An example's ``max_samples`` (the real Qwen3-VL 30B example's 10000) is its demo's: the real dataset selects
    range(max_samples), so the cap crashed G2 on the real MindSpeed-MM with 16 samples (and would drop the rest of a
    larger dataset); the draft delivers null with a note. An example without a cap stays without one."""
    baseline = {"data": {"dataset_param": {"basic_parameters": {"max_samples": 10000, "cutoff_len": 1024}}}}
    notes: list[str] = []
    cfg = draft_config(PLAN, baseline, source=workspace["source"], data_json=workspace["source"] / "data" / "train.json",
                       tree=TREE, notes=notes)
    basic = cfg["data"]["dataset_param"]["basic_parameters"]
    assert "max_samples" in basic and basic["max_samples"] is None
    assert any("max_samples: the example's cap 10000 set to null" in n for n in notes)
    bare = draft_config(PLAN, {}, source=workspace["source"], data_json=workspace["source"] / "data" / "train.json",
                        tree=TREE)
    assert "max_samples" not in bare["data"]["dataset_param"]["basic_parameters"]


def test_custom_route_sets_trust_remote_code_and_no_recompute_without_pkv(workspace):
    tree = {**TREE, "accepts_past_key_values": {}}
    cfg = draft_config({**PLAN, "route": "custom"}, {}, source=Path("/s"),
                       data_json=workspace["source"] / "data" / "train.json", tree=tree)
    assert cfg["model"]["trust_remote_code"] is True and cfg["model"]["attn_implementation"] == "sdpa"
    assert cfg["features"]["recompute"] is False and cfg["features"]["recompute_plan"]["apply_modules"] == []


def test_tokenizer_loading_follows_the_source_not_the_example(workspace, tmp_path):
    """The similar example's preprocess switches are about its own model: a source that ships tokenizer.json gets a
    fast tokenizer and no remote code; one without keeps the example's choice."""
    baseline = {"data": {"dataset_param": {"preprocess_parameters": {"use_fast_tokenizer": False,
                                                                     "trust_remote_code": True}}}}
    data = workspace["source"] / "data" / "train.json"
    assert (workspace["source"] / "tokenizer.json").is_file()
    pre = draft_config(PLAN, baseline, source=workspace["source"], data_json=data,
                       tree=TREE)["data"]["dataset_param"]["preprocess_parameters"]
    assert pre["use_fast_tokenizer"] is True and pre["trust_remote_code"] is False
    slow = draft_config({**PLAN, "route": "custom"}, baseline, source=tmp_path, data_json=data,
                        tree=TREE)["data"]["dataset_param"]["preprocess_parameters"]
    assert slow["use_fast_tokenizer"] is False and slow["trust_remote_code"] is True


def test_launch_script_swaps_only_the_config():
    text = "torchrun trainer.py \\\n    examples/qwen3vl/qwen3vl_config.yaml\n"
    out = launch_script(text, "examples/qwen3vl/qwen3vl_config.yaml", "examples/fakevl/fakevl_config.yaml")
    assert out == "torchrun trainer.py \\\n    examples/fakevl/fakevl_config.yaml\n"
    with pytest.raises(ValueError, match="does not reference"):
        launch_script(text, "examples/other.yaml", "x.yaml")


def test_load_baseline_refuses_a_missing_example(workspace):
    with pytest.raises(FileNotFoundError):
        load_baseline(workspace["target"], "examples/nope/nope.yaml")
    with pytest.raises(FileNotFoundError):
        load_baseline(workspace["target"], None)


def test_a_source_without_safetensors_loads_by_from_pretrained(workspace, tmp_path):
    baseline = {"training": {"init_model_with_meta_device": True, "load": "./ckpt/hf_path/X", "lr": 1.0e-5}}
    cfg = draft_config(PLAN, baseline, source=tmp_path, data_json=workspace["source"] / "data" / "train.json",
                       tree=TREE)
    assert cfg["training"]["init_model_with_meta_device"] is False and "load" not in cfg["training"]
    assert cfg["model"]["model_name_or_path"] == str(tmp_path)


EXAMPLE = """# parallel settings
parallel:
  fsdp_plan:
    apply_modules: # shard order matters
      - model.visual
    param_dtype: bf16

# data settings
data:
  dataset_param:
    attr:
      images: images
      messages: messages
    preprocess_parameters:
      model_name_or_path: &HF_MODEL_LOAD_PATH ./ckpt/hf_path/Example  # the HF weights
    basic_parameters:
      template: example_tpl
      dataset: ./data/example.json
  dataloader_param:
    collate_param:
      model_name: example
      ignore_pad_token_for_loss: true

# model settings
model:
  model_id: example
  model_name_or_path: *HF_MODEL_LOAD_PATH
  gdn_implementation: ascendc

# training settings
training:
  lr: 1.0e-5  # tuned for the example
  init_model_with_meta_device: true
  load: ./ckpt/hf_path/Example  # HF or DCP weights
  load_format: auto
  save: ./save_path
  plugin:
    - mindspeed_mm/fsdp/models/example
"""


def test_draft_is_a_round_trip_of_the_example(workspace, tmp_path):
    """Comments, anchors/aliases and key order of the example survive; only the keys the migration owns change."""
    from msmigrate.tools import yaml_roundtrip as rt

    (tmp_path / "examples" / "example").mkdir(parents=True)
    (tmp_path / "examples" / "example" / "example_config.yaml").write_text(EXAMPLE)
    baseline, _, _ = load_baseline(tmp_path, "examples/example/example_config.yaml")
    data = workspace["source"] / "data" / "train.json"
    text = rt.dump(draft_config(PLAN, baseline, source=workspace["source"], data_json=data, tree=TREE))
    for kept in ("# parallel settings", "# data settings", "# model settings", "# training settings",
                 "apply_modules: # shard order matters", "lr: 1.0e-5  # tuned for the example",
                 "model_name_or_path: *HF_MODEL_LOAD_PATH"):
        assert kept in text, kept
    assert f"model_name_or_path: &HF_MODEL_LOAD_PATH {workspace['source']}" in text
    assert f"load: {workspace['source']}" in text and "# HF or DCP weights" in text
    assert "gdn_implementation" not in text and "save:" not in text and "model_name: example" not in text
    # the section order of the example, and a removed last key leaves the next section's header in place
    heads = [line for line in text.splitlines() if line and not line.startswith((" ", "#"))]
    assert heads == ["parallel:", "data:", "model:", "training:", "features:"]  # a section it lacked comes last
    assert text.index("# training settings") < text.index("training:") < text.index("  lr:")
    assert text.index("images: images") < text.index("messages: messages")  # attr keys stay in the example's order


def test_the_draft_writes_the_source_processors_video_bounds(workspace, tmp_path):
    """The example's video bounds (sized for its own model) are replaced by the source video processor's; the
    example's other video settings stay; an image-only source gets no video keys it did not have."""
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "merge_size": 2, "temporal_patch_size": 2}))
    baseline = {"data": {"dataset_param": {"preprocess_parameters": {"video_max_pixels": 65536,
                                                                     "video_min_pixels": 256, "video_fps": 2.0}}}}
    data = workspace["source"] / "data" / "train.json"
    notes: list[str] = []
    pre = draft_config(PLAN, baseline, source=tmp_path, data_json=data, tree=TREE,
                       notes=notes)["data"]["dataset_param"]["preprocess_parameters"]
    assert (pre["video_max_pixels"], pre["video_min_pixels"], pre["video_fps"]) == (12845056, 0, 2.0)
    assert any("video_max_pixels 12845056" in n and "65536" in n for n in notes), notes
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"crop_to_patches": True, "max_patches": 12, "size": {"height": 448, "width": 448}}))
    image_only = draft_config(PLAN, {}, source=tmp_path, data_json=data,
                              tree=TREE)["data"]["dataset_param"]["preprocess_parameters"]
    assert image_only["image_max_pixels"] == 12 * 448 * 448 and "video_max_pixels" not in image_only
