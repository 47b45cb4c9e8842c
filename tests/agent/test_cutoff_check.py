"""G2's cutoff check: a ``cutoff_len`` that cuts through a sample's image expansion fails with the numbers (kept vs
full media tokens, the length needed), measured by the data probe on the real fixture through the stand-in's dataset;
one that fits finds nothing."""

from __future__ import annotations

import sys

from msmigrate.agent.routes.fsdp2.draft_config import draft_config, load_baseline
from msmigrate.agent.routes.fsdp2.gates.data_gate import cutoff_problems
from msmigrate.tools import yaml_roundtrip as rt
from msmigrate.tools.runtime import run_probe
from msmigrate.tools.target_checks import PROBE_ENV

PLAN = {"model_id": "qwen2_vl", "route": "transformers", "dataset_type": "huggingface", "template": "qwen2vl",
        "collator": "qwen3vl", "plugin_dir": "mindspeed_mm/fsdp/models/qwen2_vl",
        "data_plugin": "mindspeed_mm/fsdp/data/datasets/huggingface"}


def _cutoff(workspace, tmp_path, cutoff_len: int) -> dict:
    source, target = workspace["source"], workspace["target"]
    data = source / "data" / "train.json"
    baseline, _, _ = load_baseline(target, "examples/qwen3vl/qwen3vl_config.yaml")
    cfg = draft_config(PLAN, baseline, source=source, data_json=data, tree={})
    cfg["data"]["dataset_param"]["basic_parameters"]["cutoff_len"] = cutoff_len
    cfg["data"]["dataset_param"]["basic_parameters"]["cache_dir"] = str(tmp_path / "cache")
    config = tmp_path / "config.yaml"
    config.write_text(rt.dump(cfg))
    res = run_probe(sys.executable, "data_check",
                    ["--target", str(target), "--config", str(config), "--parity-source", str(source),
                     "--parity-data", str(data), "--media-token-id", str(workspace["expansion"].media_token_id)],
                    cwd=target, env_extra=PROBE_ENV, timeout=300)
    assert res.ok, res.error
    return res.data["result"]["cutoff"]


def test_a_cutoff_through_the_media_fails_g2_with_the_numbers(workspace, tmp_path):
    short = _cutoff(workspace, tmp_path, 12)
    assert short["checked"] >= 1 and short["cut"], short
    first = short["cut"][0]
    assert first["kept"] < first["full"] and first["full_length"] > 12 and first["length"] <= 12
    text = cutoff_problems(short)[0]
    assert text.startswith("cutoff_len 12 cuts the media tokens of ")
    assert f"raise data.dataset_param.basic_parameters.cutoff_len to at least " in text


def test_a_cutoff_that_fits_finds_nothing(workspace, tmp_path):
    fits = _cutoff(workspace, tmp_path, 1024)
    assert fits["checked"] >= 1 and fits["cut"] == [] and cutoff_problems(fits) == []
