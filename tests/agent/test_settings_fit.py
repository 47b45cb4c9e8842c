"""G3's settings that must fit the model, the records and the parameters they apply to (gates/settings_fit.py), the
node count and rendezvous of the launch script (launch_size.py), and a launch whose output file cannot be opened
(launch_dry_run_checks.output_findings, through a real bash dry run). Each check is shown silent on the delivered
shape and failing, naming the key to change, on the one setting changed."""

from __future__ import annotations

import re

import json
import subprocess
from pathlib import Path

import pytest

from msmigrate.agent.launch_dry_run_checks import dry_run_findings, output_findings
from msmigrate.agent.launch_script_checks import data_parallel_ranks
from msmigrate.agent.launch_size import launch_size_findings
from msmigrate.agent.routes.fsdp2.gates.settings_fit import (dataset_records, expert_parallel_findings,
                                                             reduce_dtype_findings, step_records_findings)

DENSE = {"names": ["model.language_model.layers.0.mlp.up_proj", "model.visual.blocks.0.attn"]}
MOE = {"names": ["model.language_model.layers.0.mlp.experts.0.up_proj"]}
SCRIPT = """#!/bin/bash
NPUS_PER_NODE=${NPUS_PER_NODE:-2}
MASTER_ADDR=localhost
MASTER_PORT=6000
NNODES=1
NODE_RANK=0
mkdir -p logs
torchrun --nproc_per_node $NPUS_PER_NODE --nnodes $NNODES --node_rank $NODE_RANK --master_addr $MASTER_ADDR \\
    --master_port $MASTER_PORT trainer.py cfg.yaml 2>&1 | tee logs/train.log
"""


def _source(tmp_path: Path, **config) -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "config.json").write_text(json.dumps({"model_type": "x", **config}))
    return tmp_path / "src"


def test_expert_parallelism_needs_experts_in_the_built_model_or_its_config(tmp_path):
    dense = _source(tmp_path)
    cfg = {"parallel": {"expert_parallel_size": 2}}
    found = expert_parallel_findings(cfg, DENSE, dense, "c.yaml")
    assert [f["path"] for f in found] == ["parallel.expert_parallel_size"] and "set parallel.expert_parallel_size" \
        in found[0]["message"] and found[0]["severity"] == "error"
    assert expert_parallel_findings(cfg, MOE, dense, "c.yaml") == []
    assert expert_parallel_findings(cfg, DENSE, _source(tmp_path, num_experts=8), "c.yaml") == []
    assert expert_parallel_findings({"parallel": {"expert_parallel_size": 1}}, DENSE, dense, "c.yaml") == []
    assert expert_parallel_findings(cfg, None, dense, "c.yaml") == []  # no module tree: not judged


@pytest.mark.parametrize("param, reduce, flagged", [("fp32", "bf16", True), (None, "bf16", True),
                                                     ("fp32", "fp16", True), ("bf16", "fp32", False),
                                                     ("bf16", "bf16", False), ("fp32", "fp32", False),
                                                     ("bf16", "fp16", False), ("fp32", None, False)])
def test_gradients_are_not_reduced_in_fewer_bits_than_the_parameters_hold(param, reduce, flagged):
    plan = {k: v for k, v in (("param_dtype", param), ("reduce_dtype", reduce)) if v is not None}
    found = reduce_dtype_findings({"parallel": {"fsdp_plan": plan}}, "c.yaml")
    assert bool(found) == flagged
    if flagged:
        assert found[0]["code"] == "precision-diverges" and found[0]["path"] == "parallel.fsdp_plan.reduce_dtype"


def _records(tmp_path: Path, n: int, lines: bool = False) -> Path:
    path = tmp_path / ("train.jsonl" if lines else "train.json")
    rows = [{"messages": [{"role": "user", "content": f"q{i}"}]} for i in range(n)]
    path.write_text("\n".join(json.dumps(r) for r in rows) if lines else json.dumps(rows))
    return path


def _cfg(dataset: str, ga: int = 1, mbs: int = 1, **basic) -> dict:
    return {"data": {"dataset_param": {"basic_parameters": {"dataset": dataset, **basic}}},
            "training": {"micro_batch_size": mbs, "gradient_accumulation_steps": ga}}


def test_the_records_are_counted_from_the_yamls_own_dataset_files(tmp_path):
    a, b = _records(tmp_path, 16), _records(tmp_path, 5, lines=True)
    assert dataset_records(_cfg(f"{a},{b}"), tmp_path) == 21
    assert dataset_records(_cfg("train.json", dataset_dir=str(tmp_path)), Path("/nonexistent")) == 16
    assert dataset_records(_cfg(str(a), max_samples=4), tmp_path) == 4
    assert dataset_records(_cfg(str(tmp_path / "absent.json")), tmp_path) is None  # not here: not judged


def test_an_optimizer_step_larger_than_the_records_is_an_error_naming_the_accumulation(tmp_path):
    data = str(_records(tmp_path, 16))
    ranks = data_parallel_ranks({}, SCRIPT)
    assert ranks == 2
    assert step_records_findings(_cfg(data, ga=8), ranks, tmp_path, "l.sh", "c.yaml") == []  # 16 per step: fits
    found = step_records_findings(_cfg(data, ga=16), ranks, tmp_path, "l.sh", "c.yaml")
    assert [f["path"] for f in found] == ["training.gradient_accumulation_steps"]
    assert "32 samples" in found[0]["message"] and "16 record(s)" in found[0]["message"]
    assert "lower training.gradient_accumulation_steps in c.yaml to at most 8" in found[0]["message"]
    # with no accumulation, the micro batch is what does not fit
    found = step_records_findings(_cfg(data, mbs=12), ranks, tmp_path, "l.sh", "c.yaml")
    assert [f["path"] for f in found] == ["training.micro_batch_size"]
    # a parallel size that is not data parallelism takes ranks out of the data-parallel count
    assert data_parallel_ranks({"parallel": {"ulysses_parallel_size": 2}}, SCRIPT) == 1


def test_the_node_count_is_the_runs_size_and_a_multi_node_rendezvous_is_reachable():
    sized = {"nnodes": 1, "why": "nnodes 1 (the default: one node)"}
    assert launch_size_findings(SCRIPT, None, "l.sh", sized) == []
    two = SCRIPT.replace("NNODES=1", "NNODES=2")
    found = launch_size_findings(two, None, "l.sh", sized)
    assert len(found) == 1 and found[0]["code"] == "launch-size" and found[0]["suggestion"] == "NNODES=1"
    # sized for two nodes by the user: the count fits, a loopback master does not
    found = launch_size_findings(two, None, "l.sh", {"nnodes": 2, "why": "nnodes 2 from the spec"})
    assert len(found) == 1 and "loopback" in found[0]["message"]
    assert launch_size_findings(two.replace("MASTER_ADDR=localhost", "MASTER_ADDR=10.0.0.1"), None, "l.sh",
                                {"nnodes": 2, "why": "spec"}) == []


def test_the_per_node_rank_count_is_the_runs_size_where_the_user_or_the_devices_set_it():
    from types import SimpleNamespace

    from msmigrate.agent.launch_size import launch_size, script_size

    nproc = script_size(SCRIPT)[0]
    one = re.sub(r"NPUS_PER_NODE=(\$\{NPUS_PER_NODE:-)?\d+", lambda m: f"NPUS_PER_NODE={m.group(1) or ''}1", SCRIPT)
    assert script_size(one)[0] == 1 and nproc != 1
    by_spec = launch_size(SimpleNamespace(nproc_per_node=nproc, nnodes=1, model_fields_set={"nproc_per_node"}), {})
    assert by_spec["sized_by"] == "spec" and launch_size_findings(SCRIPT, None, "l.sh", by_spec) == []
    found = launch_size_findings(one, None, "l.sh", by_spec)
    assert [(f["code"], f["key"], f["value"], f["suggestion"]) for f in found] == \
        [("launch-size", "NPUS_PER_NODE", 1, f"NPUS_PER_NODE={nproc}")]
    assert f"this run is sized for {nproc} (nproc_per_node {nproc} from the spec's launch settings; nnodes 1" in \
        found[0]["message"]
    devices = launch_size(SimpleNamespace(nproc_per_node=2, nnodes=1, model_fields_set=set()), {"npu_count": nproc})
    assert devices["sized_by"] == "accelerators" and len(launch_size_findings(one, {"npu_count": nproc}, "l.sh",
                                                                              devices)) == 1
    # a host without accelerators and no size from the user: the gate's own rank count is no size to hold a script to
    gate = launch_size(SimpleNamespace(nproc_per_node=2, nnodes=1, model_fields_set=set()), {})
    assert gate["sized_by"] == "gate" and launch_size_findings(one, None, "l.sh", gate) == []


def _checkout(tmp_path: Path, script: str) -> Path:
    root = tmp_path / "checkout"
    root.mkdir(parents=True)
    (root / "trainer.py").write_text("print('train')\n")
    (root / "cfg.yaml").write_text("training: {}\n")
    (root / "launch.sh").write_text(script)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def _parse(argv):
    script = next((a for a in argv if a.endswith(".py")), None)
    return {"training_script": script, "training_script_args": argv[argv.index(script) + 1:] if script else []}


def test_a_launch_log_into_a_folder_that_is_not_there_is_found_by_the_dry_runs_own_shell(tmp_path):
    green, _ = dry_run_findings("launch.sh", _checkout(tmp_path / "a", SCRIPT), _parse)
    assert not [f for f in green if "cannot be opened" in f["message"]]
    faulted = SCRIPT.replace("| tee logs/train.log", f"| tee {tmp_path}/missing/train.log")
    found, facts = dry_run_findings("launch.sh", _checkout(tmp_path / "b", faulted), _parse)
    said = [f for f in found if "cannot be opened" in f["message"]]
    assert facts["examined"] and len(said) == 1 and said[0]["key"] == "tee"
    assert "line 9 of launch.sh" in said[0]["message"] and "exit status is tee's" in said[0]["message"]


def test_a_redirect_bash_cannot_open_is_named_by_its_line_and_a_missing_sourced_file_is_not_one():
    script = "source /opt/toolkit/set_env.sh\n" + SCRIPT.split("\n", 1)[1] + "echo done > /nope/x.log\n"
    stderr = ("launch.sh: line 1: /opt/toolkit/set_env.sh: No such file or directory\n"
              "launch.sh: line 10: /nope/x.log: Permission denied\n")
    found = output_findings(stderr, script, "launch.sh")
    assert len(found) == 1 and found[0]["key"] == "redirect" and "line 10 of launch.sh" in found[0]["message"]
    assert output_findings("some other line\nWARNING: x\n", SCRIPT, "launch.sh") == []


def test_a_key_written_twice_is_found_in_the_delivered_file_the_bound_copy_has_lost(tmp_path):
    from msmigrate.agent.routes.fsdp2.gates.config_gate import as_written_findings

    config = tmp_path / "c.yaml"
    config.write_text("training:\n  lr: 1.0e-4\n  seed: 42\n  no_load_rng: true\n  lr: 1.0e-5\n")
    found = as_written_findings(config, tmp_path / "bound_c.yaml")
    assert [(f["code"], f["path"], f["line"]) for f in found] == [("yaml-duplicate-key", "training.lr", 5)]
    assert as_written_findings(config, config) == []  # unbound: the gate's own check reads this very file


def test_the_rules_repair_drops_the_repeat_of_a_key_and_keeps_the_first():
    from msmigrate.agent.routes.fsdp2.gates.config_gate import as_written_findings
    from msmigrate.agent.routes.fsdp2.rules.autofix import drop_repeated_keys
    from msmigrate.tools import yaml_roundtrip as rt

    text = "training:\n  lr: 1.0e-4  # the source's\n  seed: 42\n  load:\n    - a\n  lr: 1.0e-5\n"
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "c.yaml"
        config.write_text(text)
        findings = as_written_findings(config, Path(tmp) / "bound.yaml")
    fixed, notes = drop_repeated_keys(text, findings)
    assert fixed == "training:\n  lr: 1.0e-4  # the source's\n  seed: 42\n  load:\n    - a\n"
    assert rt.load(fixed)["training"]["lr"] == 1.0e-4 and notes[0].startswith("deleted line 6")
    # a repeated key that opens a block is not one line to drop: left for the gate to report again
    nested = "a:\n  b: 1\na:\n  b: 2\n"
    assert drop_repeated_keys(nested, [{"code": "yaml-duplicate-key", "path": "a", "line": 3}]) == (nested, [])


def test_a_launcher_started_in_the_background_with_nothing_waiting_is_found_and_the_dry_run_outlives_it(tmp_path):
    """The dry run waits for what the script left running (the recorder) before it reads and removes its shadow."""
    faulted = SCRIPT.replace("torchrun --nproc", "nohup torchrun --nproc").replace(
        "| tee logs/train.log", "> logs/train.log &\necho started")
    found, facts = dry_run_findings("launch.sh", _checkout(tmp_path / "bg", faulted), _parse)
    said = [f for f in found if f["key"] == "&"]
    assert facts["examined"] and len(said) == 1 and "line 8 of launch.sh" in said[0]["message"]
    waited, _ = dry_run_findings("launch.sh", _checkout(tmp_path / "wait", faulted + "wait\n"), _parse)
    assert not [f for f in waited if f["key"] == "&"]


def test_modules_kept_out_of_fsdp_must_be_frozen():
    from msmigrate.agent.routes.fsdp2.gates.settings_fit import ignored_trained_findings

    tree = {"names": ["model", "model.visual", "model.visual.blocks.0", "model.visual.merger", "model.language_model",
                      "lm_head"]}
    cfg = {"parallel": {"fsdp_plan": {"ignored_modules": ["model.visual"]}}, "model": {"freeze": []}}
    (found,) = ignored_trained_findings(cfg, tree, "c.yaml")
    assert found["path"] == "parallel.fsdp_plan.ignored_modules" and "model.visual" in found["message"]
    cfg["model"]["freeze"] = ["model.visual"]
    assert ignored_trained_findings(cfg, tree, "c.yaml") == []
    # a frozen parent covers the ignored blocks under it; freezing one child leaves the rest trained
    cfg = {"parallel": {"fsdp_plan": {"ignored_modules": ["model.visual.blocks.{*}"]}}, "model": {"freeze": ["model"]}}
    assert ignored_trained_findings(cfg, tree, "c.yaml") == []
    cfg["model"]["freeze"] = ["model.visual.merger"]
    assert len(ignored_trained_findings(cfg, tree, "c.yaml")) == 1
    assert ignored_trained_findings({"parallel": {"fsdp_plan": {}}}, tree, "c.yaml") == []


def test_a_folder_the_yaml_loads_that_holds_another_model_is_found(tmp_path):
    import yaml

    from msmigrate.agent.routes.fsdp2.gates.settings_fit import other_model_findings

    paths = (("model", "model_name_or_path"), ("training", "load"))

    def found_in(config):
        return other_model_findings(yaml.safe_load(config.read_text()), paths, tmp_path / "target", source, "c.yaml")

    source = tmp_path / "src"
    source.mkdir()
    (source / "config.json").write_text(json.dumps({"model_type": "qwen2_vl", "text_config": {"hidden_size": 64,
                                                                                           "num_hidden_layers": 2}}))
    other = tmp_path / "target" / "ckpt" / "qwen2_vl_7b"
    other.mkdir(parents=True)
    (other / "config.json").write_text(json.dumps({"model_type": "qwen2_vl", "hidden_size": 3584,
                                                   "num_hidden_layers": 28}))
    config = tmp_path / "c.yaml"
    config.write_text(f"model:\n  model_name_or_path: {source}\ntraining:\n  load: ckpt/qwen2_vl_7b\n")
    (found,) = found_in(config)
    assert found["path"] == "training.load" and "hidden_size 3584 where the source has 64" in found["message"]
    config.write_text(f"model:\n  model_name_or_path: {source}\ntraining:\n  load: {source}\n")
    assert found_in(config) == []
    # a copy of the same model elsewhere is the same model
    (other / "config.json").write_text((source / "config.json").read_text())
    config.write_text("training:\n  load: ckpt/qwen2_vl_7b\n")
    assert found_in(config) == []


def test_a_key_written_one_level_off_moves_into_its_own_section():
    from msmigrate.agent.routes.fsdp2.rules.autofix import apply_findings, nearest_paths

    finding = {"severity": "error", "code": "misplaced-key", "path": "data.dataset_param.template",
               "suggestion": "did you mean `data.dataset_param.basic_parameters.template` or "
                             "`data.val_dataset_param.basic_parameters.template`?"}
    assert nearest_paths(finding["path"], ["data.dataset_param.basic_parameters.template",
                                           "data.val_dataset_param.basic_parameters.template"]) == \
        ["data.dataset_param.basic_parameters.template"]
    cfg = {"data": {"dataset_param": {"template": "qwen2vl", "basic_parameters": {"cutoff_len": 256}}}}
    (done,) = apply_findings(cfg, [finding])
    assert cfg == {"data": {"dataset_param": {"basic_parameters": {"cutoff_len": 256, "template": "qwen2vl"}}}}
    assert done.startswith("moved data.dataset_param.template → data.dataset_param.basic_parameters.template")
    # two equally near places: no guess
    assert len(nearest_paths("a.x", ["a.b.x", "a.c.x"])) == 2


def test_a_folder_the_trainer_writes_to_that_this_host_cannot_make_is_g3s(tmp_path, monkeypatch):
    import os

    from msmigrate.agent.routes.fsdp2.gates.settings_fit import written_folder_findings
    from msmigrate.knowledge.classifier import classify

    (tmp_path / "ckpt.tar").write_text("")
    (tmp_path / "ro").mkdir()
    cfg = {"training": {"save": "ckpt.tar/run1", "load": "ro/x"},
           "data": {"dataset_param": {"basic_parameters": {"cache_dir": str(tmp_path / "ro" / "cache")}}}}
    assert [f["path"] for f in written_folder_findings(cfg, tmp_path, "c.yaml")] == ["training.save"]
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == tmp_path / "ro" else real(p, mode))
    found = written_folder_findings(cfg, tmp_path, "c.yaml")
    assert [(f["code"], f["path"]) for f in found] == [
        ("output-folder-unwritable", "training.save"),
        ("output-folder-unwritable", "data.dataset_param.basic_parameters.cache_dir")]
    assert "is a file" in found[0]["message"] and "not writable here" in found[1]["message"]
    line = f"[{found[1]['code']}] {found[1]['path']}: {found[1]['message']}"
    assert classify(line, finding_codes=[found[1]["code"]]).owner == "config"
    # a folder that exists and is writable, a variable the shell decides, no such key: nothing
    assert written_folder_findings({"training": {"save": "out", "output_dir": "$OUT/x"}}, tmp_path, "c.yaml") == []


def test_a_records_file_the_dataset_list_names_twice_is_g3s(tmp_path):
    from msmigrate.agent.routes.fsdp2.gates.settings_fit import dataset_records, repeated_dataset_findings

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.json").write_text(json.dumps([{"messages": []}] * 3))
    (tmp_path / "data" / "more.json").write_text(json.dumps([{"messages": []}] * 2))

    def cfg(dataset):
        return {"data": {"dataset_param": {"basic_parameters": {"dataset": dataset, "dataset_dir": "data"}}}}

    twice = cfg(f"train.json,{tmp_path}/data/train.json")  # one file, listed as written and by its absolute path
    (f,) = repeated_dataset_findings(twice, tmp_path, "c.yaml")
    assert (f["code"], f["path"]) == ("bad-value", "data.dataset_param.basic_parameters.dataset")
    assert "2 times" in f["message"] and dataset_records(twice, tmp_path) == 6
    assert repeated_dataset_findings(cfg("train.json,more.json"), tmp_path, "c.yaml") == []
    assert len(repeated_dataset_findings(cfg(["gone.json", "gone.json"]), tmp_path, "c.yaml")) == 1


def test_a_log_interval_longer_than_the_run_is_g3s():
    from msmigrate.agent.routes.fsdp2.gates.settings_fit import log_interval_findings
    from msmigrate.agent.routes.fsdp2.rules.autofix import restore_values

    cfg = {"training": {"train_iters": 6, "log_interval": 10}}
    (f,) = log_interval_findings(cfg, "c.yaml")
    assert (f["code"], f["path"], f["maximum"]) == ("value-out-of-range", "training.log_interval", 6)
    assert "no iteration line" in f["message"]
    assert restore_values(cfg, [f], {"training": {"train_iters": 6}}) and "log_interval" not in cfg["training"]
    assert log_interval_findings({"training": {"train_iters": 6, "log_interval": 6}}, "c.yaml") == []
    assert log_interval_findings({"training": {"log_interval": 10}}, "c.yaml") == []  # no length: not judged
