"""G3's launch-script checks beyond its size: ports a rendezvous can bind, and the variables the target's import path
reads that the gates' own launches set (read from the target's code, here the stand-in tree and a written one)."""

from __future__ import annotations

from pathlib import Path

import msmigrate
from msmigrate.agent.launch_script_checks import import_path_env, port_findings, route_env_findings, script_sets
from msmigrate.knowledge.classifier import classify
from msmigrate.tools.launcher.command import ROUTE_ENV

STANDIN = Path(msmigrate.__file__).parent / "testbeds" / "standin" / "tree"
ENTRY = "mindspeed_mm/fsdp/train/trainer.py"
SCRIPT = """#!/bin/bash
export NON_MEGATRON=true
NPUS_PER_NODE=${NPUS_PER_NODE:-2}
MASTER_PORT=${MASTER_PORT:-6000}
torchrun --nproc_per_node $NPUS_PER_NODE --master_port $MASTER_PORT mindspeed_mm/fsdp/train/trainer.py cfg.yaml
"""


def test_ports_outside_the_tcp_range_are_errors_and_a_good_one_is_not():
    assert port_findings(SCRIPT, "l.sh") == []
    found = port_findings(SCRIPT.replace("MASTER_PORT=${MASTER_PORT:-6000}", "MASTER_PORT=600000"), "l.sh")
    assert [(f["code"], f["key"], f["value"]) for f in found] == [("launch-port", "MASTER_PORT", 600000)]
    assert "MASTER_PORT" in found[0]["message"] and "l.sh" in found[0]["message"]
    flag = port_findings("torchrun --master-port=0 t.py\n", "l.sh")
    assert [(f["key"], f["value"]) for f in flag] == [("--master-port", 0)]


def test_the_route_variable_is_read_from_the_targets_import_path():
    # the stand-in's mindspeed_mm/__init__.py compares NON_MEGATRON with "true" (as the real package does)
    assert import_path_env(STANDIN, ENTRY).get("NON_MEGATRON") == "true"
    assert set(ROUTE_ENV) == {"NON_MEGATRON"}
    assert route_env_findings(SCRIPT, "l.sh", STANDIN, [ENTRY]) == []
    dropped = route_env_findings(SCRIPT.replace("export NON_MEGATRON=true\n", ""), "l.sh", STANDIN, [ENTRY])
    assert [(f["code"], f["key"], f["value"]) for f in dropped] == [("launch-env", "NON_MEGATRON", None)]
    assert "export NON_MEGATRON=true" in dropped[0]["message"]
    wrong = route_env_findings(SCRIPT.replace("NON_MEGATRON=true", "NON_MEGATRON=false"), "l.sh", STANDIN, [ENTRY])
    assert wrong and wrong[0]["value"] == "false"


def test_a_target_whose_import_path_reads_no_variable_asks_for_none(tmp_path):
    (tmp_path / "pkg" / "train").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("import os\nDEBUG = os.environ.get('X_DEBUG')\n")
    (tmp_path / "pkg" / "train" / "run.py").write_text("print('train')\n")
    assert import_path_env(tmp_path, "pkg/train/run.py") == {}  # read, never compared: not a route switch
    assert route_env_findings("torchrun pkg/train/run.py\n", "l.sh", tmp_path, ["pkg/train/run.py"]) == []
    (tmp_path / "pkg" / "__init__.py").write_text("import os\nif os.environ['NON_MEGATRON'] == 'true':\n    pass\n")
    assert import_path_env(tmp_path, "pkg/train/run.py") == {"NON_MEGATRON": "true"}


def test_script_values_are_read_in_every_form_a_launch_script_writes_them():
    assert script_sets("export A=1\n", "A") == "1"
    assert script_sets("A=${A:-x}\n", "A") == "x"
    assert script_sets('export A="true"\n', "A") == "true"
    assert script_sets("B=1\n", "A") is None


def test_the_findings_are_config_cases_that_name_the_script():
    for code, case in (("launch-port", "launch-port-invalid"), ("launch-env", "launch-route-env-missing")):
        verdict = classify(f"[{code}] X: examples/x/finetune_x.sh sets X", [code])
        assert (verdict.case_id, verdict.owner) == (case, "config")


def test_a_parallel_size_that_does_not_divide_the_scripts_ranks_is_out_of_range():
    from msmigrate.agent.launch_script_checks import parallel_size_findings

    cfg = {"parallel": {"tensor_parallel_size": 1, "fully_shard_parallel_size": 8}}
    found = parallel_size_findings(cfg, SCRIPT, "l.sh", "c.yaml")  # the script starts 2 ranks on 1 node
    assert [(f["code"], f["path"], f["value"]) for f in found] == \
        [("value-out-of-range", "parallel.fully_shard_parallel_size", 8)]
    assert "divisor of 2" in found[0]["message"]
    assert parallel_size_findings({"parallel": {"fully_shard_parallel_size": "auto"}}, SCRIPT, "l.sh", "c.yaml") == []
    assert parallel_size_findings({"parallel": {"fully_shard_parallel_size": 2}}, SCRIPT, "l.sh", "c.yaml") == []
    assert parallel_size_findings(cfg, "torchrun t.py\n", "l.sh", "c.yaml") == []  # no rank count: nothing to say


def test_a_sample_cap_below_one_step_of_the_scripts_ranks_is_out_of_range():
    """max_samples 1 for the script's 2 ranks with drop_last: no rank gets a batch; 2 (one each) is enough."""
    from msmigrate.agent.launch_script_checks import sample_count_findings

    cfg = {"data": {"dataset_param": {"basic_parameters": {"max_samples": 1}}, "dataloader_param": {"drop_last": True}},
           "training": {"micro_batch_size": 1}, "parallel": {"tensor_parallel_size": 1}}
    found = sample_count_findings(cfg, SCRIPT, "l.sh", "cfg.yaml")
    assert [(f["path"], f["minimum"]) for f in found] == [("data.dataset_param.basic_parameters.max_samples", 2)]
    assert "max_samples" in found[0]["message"] and "no batch" in found[0]["message"]
    cfg["data"]["dataset_param"]["basic_parameters"]["max_samples"] = 2
    assert sample_count_findings(cfg, SCRIPT, "l.sh", "cfg.yaml") == []
    cfg["training"]["micro_batch_size"] = 2  # one step of 2 ranks × 2 samples
    assert [f["minimum"] for f in sample_count_findings(cfg, SCRIPT, "l.sh", "cfg.yaml")] == [4]
    cfg["parallel"]["tensor_parallel_size"] = 2  # the 2 ranks are one tensor-parallel group: one data rank
    assert sample_count_findings(cfg, SCRIPT, "l.sh", "cfg.yaml") == []
    cfg["data"]["dataloader_param"]["drop_last"] = False
    cfg["parallel"]["tensor_parallel_size"] = 1
    assert sample_count_findings(cfg, SCRIPT, "l.sh", "cfg.yaml") == []


def test_a_continuation_broken_by_whitespace_after_the_backslash_is_named_with_its_line():
    from msmigrate.agent.launch_script_checks import continuation_findings

    good = "torchrun $ARGS trainer.py \\\n    cfg.yaml\n"
    assert continuation_findings(good, "l.sh") == []
    found = continuation_findings(good.replace(" \\\n", " \\ \n"), "l.sh")
    assert [(f["code"], f["key"]) for f in found] == [("launch-continuation", "line 1")]
    assert "cfg.yaml" in found[0]["message"] and "l.sh" in found[0]["message"]
    assert continuation_findings("# a comment \\ \ntorchrun t.py\n", "l.sh") == []


def test_an_entry_that_reads_rank_variables_started_by_plain_python_is_named():
    """The stand-in's trainer package reads LOCAL_RANK / RANK / WORLD_SIZE with no default: torchrun sets them, a
    plain python start does not."""
    from msmigrate.agent.launch_script_checks import rank_env_findings

    assert rank_env_findings(SCRIPT, "l.sh", STANDIN, [ENTRY]) == []
    plain = SCRIPT.replace("torchrun --nproc_per_node $NPUS_PER_NODE --master_port $MASTER_PORT", "python")
    found = rank_env_findings(plain, "l.sh", STANDIN, [ENTRY])
    assert [f["code"] for f in found] == ["launch-env"] and "torchrun" in found[0]["message"]
    assert "LOCAL_RANK" in found[0]["message"]
    assert rank_env_findings(plain.replace("python ", "python -m torch.distributed.run "), "l.sh", STANDIN,
                             [ENTRY]) == []
    exported = "export RANK=0 LOCAL_RANK=0 WORLD_SIZE=1\n".replace(" LOCAL", "\nexport LOCAL").replace(
        " WORLD", "\nexport WORLD") + plain
    assert rank_env_findings(exported, "l.sh", STANDIN, [ENTRY]) == []
