"""The Megatron route's data gate fails on what would break the data provider or get_batch, and only passes on the
files it read."""

from __future__ import annotations

import json
from pathlib import Path

from msmigrate.agent.routes.megatron.gates.data_gate import check_data_json

CONTRACT = {"forward": "vlm.py:VLMModel.forward", "consumed": ["input_ids", "labels", "pixel_values"],
            "not_consumed": [], "takes_kwargs": True}


def layout(tmp_path: Path, images=("a.png",), model_dir=True) -> Path:
    (tmp_path / "src").mkdir()
    if model_dir:
        (tmp_path / "src" / "config.json").write_text("{}")
    (tmp_path / "src" / "data").mkdir()
    for i in images:
        (tmp_path / "src" / "data" / i).write_bytes(b"png")
    rows = [{"messages": [], "images": ["a.png"]}]
    (tmp_path / "src" / "data" / "train.json").write_text(json.dumps(rows))
    doc = {"dataset_param": {"dataset_type": "huggingface",
                             "preprocess_parameters": {"model_name_or_path": str(tmp_path / "src")},
                             "basic_parameters": {"dataset": str(tmp_path / "src/data/train.json"),
                                                  "dataset_dir": str(tmp_path / "src/data")}}}
    (tmp_path / "d.json").write_text(json.dumps(doc))
    return tmp_path


def test_delivered_data_json_passes(tmp_path):
    problems, warnings, facts = check_data_json(layout(tmp_path), "d.json", CONTRACT)
    assert problems == [] and facts["records"] == 1 and facts["images"] == 1


def test_missing_image_and_processor_folder_fail(tmp_path):
    problems, _, _ = check_data_json(layout(tmp_path, images=(), model_dir=False), "d.json", CONTRACT)
    assert any("not an HF folder" in p for p in problems) and any("image paths do not resolve" in p for p in problems)


def test_unconsumed_batch_field_warns_with_kwargs_and_fails_without(tmp_path):
    root = layout(tmp_path)
    gap = {**CONTRACT, "not_consumed": ["mm_token_type_ids"]}
    problems, warnings, _ = check_data_json(root, "d.json", gap)
    assert not problems and "mm_token_type_ids" in warnings[0]
    problems, _, _ = check_data_json(root, "d.json", {**gap, "takes_kwargs": False})
    assert "raises TypeError" in problems[0]


def test_unmeasured_contract_does_not_pass(tmp_path):
    problems, _, _ = check_data_json(layout(tmp_path), "d.json", {"error": "the source processor's outputs were "
                                                                  "not measured"})
    assert problems and "get_batch contract not established" in problems[0]
