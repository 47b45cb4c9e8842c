"""G3 checks the launch script's own entry point: a trainer path that is not in the target fails G3 (it used to
pass every gate, the gates launching the trainer themselves), with a finding code the classifier routes to config."""

from __future__ import annotations

from msmigrate.agent.routes.fsdp2.gates.config_gate import missing_entries
from msmigrate.knowledge.classifier import classify

SCRIPT = """#!/bin/bash
torchrun $DISTRIBUTED_ARGS mindspeed_mm/fsdp/train/{trainer} \\
    examples/tiny/tiny_config.yaml \\
    2>&1 | tee logs/train.log
python /opt/tools/report.py
"""


def test_a_relative_entry_point_missing_from_the_target_is_reported(tmp_path):
    (tmp_path / "mindspeed_mm/fsdp/train").mkdir(parents=True)
    (tmp_path / "mindspeed_mm/fsdp/train/trainer.py").write_text("")
    assert missing_entries(SCRIPT.format(trainer="trainer.py"), tmp_path) == []  # (absolute paths: not ours)
    assert missing_entries(SCRIPT.format(trainer="trainr.py"), tmp_path) == ["mindspeed_mm/fsdp/train/trainr.py"]


def test_the_finding_routes_to_config():
    line = "[launch-entry-missing] examples/tiny/finetune_tiny.sh: it runs x/trainr.py, which is not a file"
    verdict = classify(line, ["launch-entry-missing"], gate_verdict=[line])
    assert (verdict.case_id, verdict.owner) == ("launch-entry-missing", "config")


def test_the_rules_repair_restores_a_rejected_value_from_the_draft():
    from msmigrate.agent.routes.fsdp2.rules.autofix import restore_values

    cfg = {"training": {"micro_batch_size": 0, "gradient_accumulation_steps": 0, "lr_warmup_ratio": 10}}
    draft = {"training": {"micro_batch_size": 1, "gradient_accumulation_steps": 1}}
    findings = [{"severity": "error", "code": "value-out-of-range", "path": f"training.{k}"}
                for k in ("micro_batch_size", "gradient_accumulation_steps", "lr_warmup_ratio")]
    done = restore_values(cfg, findings, draft)
    assert cfg == {"training": {"micro_batch_size": 1, "gradient_accumulation_steps": 1}} and len(done) == 3


def test_a_draft_that_repeats_the_rejected_value_falls_back_to_the_targets_default():
    from msmigrate.agent.routes.fsdp2.rules.autofix import restore_values

    cfg = {"training": {"micro_batch_size": 0}}
    finding = {"severity": "error", "code": "value-out-of-range", "path": "training.micro_batch_size"}
    assert restore_values(cfg, [finding], {"training": {"micro_batch_size": 0}}) and cfg == {"training": {}}


def test_a_consistency_finding_restores_the_drafts_value_or_lets_the_default_apply():
    # lr_min above lr (G3's [bad-value]): the fault-routing bench's config-lr-min-above-lr stopped unrepaired
    from msmigrate.agent.routes.fsdp2.rules.autofix import restore_values

    finding = {"severity": "error", "code": "bad-value", "path": "training.lr_min"}
    cfg = {"training": {"lr": 0.0001, "lr_min": 0.001}}
    assert restore_values(cfg, [finding], {"training": {"lr": 0.0001, "lr_min": 0.0}}) and \
        cfg["training"]["lr_min"] == 0.0
    cfg = {"training": {"lr": 0.0001, "lr_min": 0.001}}
    assert restore_values(cfg, [finding], {"training": {"lr": 0.0001, "lr_min": 0.001}}) and \
        cfg == {"training": {"lr": 0.0001}}


def test_a_yaml_that_does_not_load_is_gated_as_it_is_not_a_crash(tmp_path):
    """Binding the inputs reads the YAML; a tab-indented line used to raise out of the data gate and end the run
    with an error instead of a failed gate."""
    from types import SimpleNamespace

    from msmigrate.agent.routes.fsdp2.gates.bound_inputs import bound_config

    config = tmp_path / "c.yaml"
    config.write_text("training:\n  seed: 42\n\tlog_interval: 1\n")
    deps = SimpleNamespace(spec=SimpleNamespace(bind_inputs=True, policy="none"),
                           ctx=SimpleNamespace(source=tmp_path, data_path=tmp_path / "train.json", run_dir=tmp_path / "run"))
    assert bound_config(deps, config) == config
