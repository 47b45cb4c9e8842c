"""The Megatron route's check tools as a policy calls them (the LangChain tools build_tools hands the graph): an
expected failure is a result with ``ok: false`` and an error naming what to repair, never an exception; a pass
carries what was checked. What they read of the plan comes from RunContext.plan."""

from __future__ import annotations

import json
from pathlib import Path

from msmigrate.core.run_context import RunContext
from msmigrate.tools.megatron.route_tools import MEGATRON_TOOLS, megatron_tools

CONTRACT = {"forward": "vlm.py:VLMModel.forward", "consumed": ["input_ids", "labels", "pixel_values"],
            "not_consumed": [], "takes_kwargs": True}


def source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "data").mkdir(parents=True)
    (src / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl", "text_config": {
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 4}}))
    (src / "data" / "a.png").write_bytes(b"png")
    (src / "data" / "train.json").write_text(json.dumps([{"messages": [], "images": ["a.png"]}]))
    return src


def tools(tmp_path: Path, target: Path, plan: dict | None = None) -> dict:
    ctx = RunContext("t", tmp_path / "run", source(tmp_path), target, "tinyvl")
    ctx.plan = plan or {}
    return {t.name: t for t in megatron_tools(ctx)}


def call(tool, **args) -> dict:
    return json.loads(tool.invoke(args))


def test_every_route_tool_is_built_with_described_fields(tmp_path):
    built = tools(tmp_path, tmp_path)
    assert tuple(built) == MEGATRON_TOOLS
    for tool in built.values():
        for name, prop in tool.tool_call_schema.model_json_schema()["properties"].items():
            assert prop.get("description"), (tool.name, name)


def test_sizes_that_do_not_divide_the_model_come_back_as_an_error(tmp_path):
    t = tools(tmp_path, tmp_path)
    bad = call(t["check_parallel_sizes"], tp=4)
    assert bad["ok"] is False and "num_key_value_heads 2 is not divisible by tp 4" in bad["error"]
    bad = call(t["check_parallel_sizes"], tp=2, world_size=4, micro_batch_size=1, global_batch_size=3)
    assert bad["ok"] is False and "global batch 3" in bad["error"]
    good = call(t["check_parallel_sizes"], tp=2, world_size=4, micro_batch_size=1, global_batch_size=4)
    assert good["ok"] and good["data"]["facts"]["dp"] == 2 and good["data"]["facts"]["grad_accum"] == 2
    # the converter refuses the same sizes before any probe runs
    conv = call(t["convert_weights"], tp=4)
    assert conv["ok"] is False and "not divisible by tp 4" in conv["error"]


def test_convert_weights_stays_in_the_runs_scratch_folder(tmp_path):
    conv = call(tools(tmp_path, tmp_path)["convert_weights"], tp=2, output_dir="../../elsewhere")
    assert conv["ok"] is False and "leaves the run's scratch folder" in conv["error"]


def test_data_json_is_checked_against_the_plans_get_batch_contract(tmp_path):
    src = source(tmp_path / "s")
    doc = {"dataset_param": {"dataset_type": "huggingface",
                             "preprocess_parameters": {"model_name_or_path": str(src)},
                             "basic_parameters": {"dataset": str(src / "data/train.json")}}}
    (tmp_path / "d.json").write_text(json.dumps(doc))
    # files and contract fine, but the JSON names no template: the chat format is unproven, as G2 would say
    # (the template parity itself: tests/agent/test_megatron_data_gate.py)
    ok = call(tools(tmp_path, tmp_path, {"batch_contract": CONTRACT})["check_megatron_data"], data_json="d.json")
    assert ok["ok"] is False and ok["error"] == "data parity not proven: d.json names no basic_parameters.template: " \
        "the chat format is unknown", ok["error"]
    gap = {**CONTRACT, "not_consumed": ["video_grid_thw"], "takes_kwargs": False}
    bad = call(tools(tmp_path / "g", tmp_path, {"batch_contract": gap})["check_megatron_data"], data_json="d.json")
    assert bad["ok"] is False and "no parameter for ['video_grid_thw']" in bad["error"]
    # no plan contract: the tool says so (as G2 would), it does not pass on the files alone
    bare = call(tools(tmp_path / "n", tmp_path)["check_megatron_data"], data_json="d.json")
    assert bare["ok"] is False and "no get_batch contract" in bare["error"]
    missing = call(tools(tmp_path / "m", tmp_path, {"batch_contract": CONTRACT})["check_megatron_data"],
                   data_json="examples/none.json")
    assert missing["ok"] is False and "cannot read examples/none.json" in missing["error"]


def test_megatron_config_on_the_standin_example_and_a_missing_file(tmp_path, megatron_standin):
    t = tools(tmp_path, megatron_standin)
    missing = call(t["check_megatron_config"], model_json="examples/x/model.json",
                   script="examples/qwen2.5vl/finetune_qwen2_5_vl_tiny.sh")
    assert missing["ok"] is False and "cannot read the model config or the script" in missing["error"]
    example = call(t["check_megatron_config"], model_json="examples/qwen2.5vl/model_tiny.json",
                   script="examples/qwen2.5vl/finetune_qwen2_5_vl_tiny.sh")
    # the example's sizes are not the source's: G3's own source comparison names the field
    assert example["ok"] is False and "text_decoder.num_layers is 2, the source config has num_hidden_layers = 4" in example["error"]
    assert example["data"]["facts"]["model_ids"]["text_decoder"]


def test_convert_weights_runs_the_targets_converter_at_tp_and_pp(tmp_path, megatron_standin):
    from msmigrate.testbeds.megatron_standin import EXAMPLE

    ctx = RunContext("t", tmp_path / "run", megatron_standin / EXAMPLE["hf_dir"], megatron_standin, "tinyvl")
    ctx.plan = {"converter": EXAMPLE["converter"], "parallel": {"tp": 2, "pp": 2}}
    conv = {t.name: t for t in megatron_tools(ctx)}["convert_weights"]
    res = call(conv, tp=2, pp=2)
    assert res["ok"] and res["data"]["converter_used"] == "target", res
    facts = res["data"]["facts"]
    # 2 TP ranks x 2 stages: the text layers spread over the stages, the encoder whole on the first
    assert facts["megatron_files"] == 4 and facts["llm_pp_layers"] == [[1, 1]] and facts["vit_pp_layers"] == [[2, 0]]
    assert res["data"]["notes"] == []
    # sizes other than the launch's are converted as asked, and the result says G1 will use the launch's
    other = call(conv, tp=2, pp=1)
    assert other["ok"] and other["data"]["facts"]["megatron_files"] == 2
    assert any("the plan's launch has pp=2" in n for n in other["data"]["notes"])
