"""The Megatron route's data gate fails on what would break the data provider or get_batch, or on a chat format
other than the source's own, and only passes on the files it read."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from msmigrate.agent.routes.megatron.gates.data_gate import check_data_json, megatron_data_record

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


# --- data parity: the data JSON's template against the source's own chat template -----------------------------


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    from msmigrate.testbeds.fixtures import build_source

    root = tmp_path_factory.mktemp("src")
    return {f: build_source(f, root / f) for f in ("qwen2_5_vl", "llava")}


@pytest.fixture(scope="module")
def mstandin(tmp_path_factory):
    from msmigrate.testbeds.megatron_standin import write_megatron_standin

    return write_megatron_standin(tmp_path_factory.mktemp("mm") / "MindSpeed-MM", git_init=False, with_assets=False)


def delivered(target: Path, source: Path, template: str | None) -> str:
    """The data JSON the route delivers (the stand-in example's, pointed at the source), with ``template``."""
    doc = json.loads((target / "examples/qwen2.5vl/data_tiny.json").read_text())
    basic = doc["dataset_param"]["basic_parameters"]
    doc["dataset_param"]["preprocess_parameters"]["model_name_or_path"] = str(source)
    basic.update({"dataset": str(source / "data" / "train.json"), "dataset_dir": str(source / "data")})
    if template is None:
        basic.pop("template")
    else:
        basic["template"] = template
    name = f"data_{source.name}_{template}.json"
    (target / name).write_text(json.dumps(doc))
    return name


def test_template_matching_the_source_passes_g2(mstandin, sources):
    src = sources["qwen2_5_vl"]
    rec = megatron_data_record(sys.executable, mstandin, src, delivered(mstandin, src, "qwen2vl"), CONTRACT)
    assert rec["passed"], rec["summary"]
    par = rec["data_parity"]
    assert par["facts"]["turns_compared"] >= 2 and par["facts"]["registered_in"].endswith("func_utils/template.py")
    assert "renders 2 turn(s) of 2 sample(s) as the source's chat template does" in rec["summary"]


def test_chatml_template_for_a_user_assistant_model_fails_g2(mstandin, sources):
    """LLaVA's own template writes ``USER: … ASSISTANT:``; the data JSON says qwen2vl (ChatML): G2 fails on it."""
    src = sources["llava"]
    rec = megatron_data_record(sys.executable, mstandin, src, delivered(mstandin, src, "qwen2vl"), CONTRACT)
    assert not rec["passed"]
    assert "data parity: sample 0, turn 1: the text before the answer differs" in rec["failure_text"]
    assert "'USER: Describe the image. ASSI'" in rec["failure_text"], rec["failure_text"]


def test_unknown_or_missing_template_is_unproven_not_passed(mstandin, sources):
    src = sources["qwen2_5_vl"]
    for template, why in (("nosuch", "not registered in the target"), (None, "names no basic_parameters.template")):
        rec = megatron_data_record(sys.executable, mstandin, src, delivered(mstandin, src, template), CONTRACT)
        assert not rec["passed"] and "data parity not proven" in rec["summary"] and why in rec["summary"], \
            rec["summary"]
