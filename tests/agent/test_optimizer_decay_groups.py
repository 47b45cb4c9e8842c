"""Which parameters the target's optimizer decays against which the source's recipe decays (G3,
``optimizer_recipe.decay_group_findings`` over ``probes/decay_groups.py``): the HF Trainer exempts biases and
normalisation weights whatever its weight decay; the target's own trainer decides its groups. The probe runs for real
on the stand-in (its qwen3vl plugin against the tiny Qwen3-VL source it ships); the heldout4 weight-decay fault's own
edit is applied to the YAML. Nothing here names a fault's message."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import yaml

from msmigrate.agent.routes.fsdp2.optimizer_recipe import decay_group_findings
from msmigrate.agent.routes.fsdp2.rules.autofix import restore_values
from msmigrate.knowledge.classifier import classify
from msmigrate.testbeds.faults import all_faults
from msmigrate.testbeds.faults.injection import SetLine
from msmigrate.testbeds.standin import write_standin
from msmigrate.tools.repo_reader.training_recipe import source_recipe
from msmigrate.tools.runtime import PROBES_DIR, run_probe

CONFIG = "examples/qwen3vl/qwen3vl_config.yaml"
FAULT = {f.id: f for f in all_faults()}["h4-config-weight-decay-everywhere"]
DEFAULTS = {"clip_grad": 1.0, "adam_eps": 1e-8, "weight_decay": 0.0, "optimizer": "adamw"}


def _hf_recipe(tmp_path: Path) -> dict:
    (tmp_path / "src").mkdir(exist_ok=True)
    return source_recipe(tmp_path / "src")


def _with_fault(text: str) -> str:
    for edit in FAULT.edits:
        assert isinstance(edit, SetLine)
        text, n = re.subn(rf"^(\s*){re.escape(edit.key)}{edit.sep}.*$", rf"\g<1>{edit.key}{edit.sep} {edit.value}",
                          text, count=1, flags=re.M)
        assert n == 1
    return text


def _probe_on(target: Path):
    def probe():
        res = run_probe(sys.executable, "decay_groups",
                        ["--target", str(target), "--plugin", "mindspeed_mm/fsdp/models/qwen3vl",
                         "--model-id", "qwen3_vl", "--model-name-or-path", str(target / "assets/tiny_qwen3vl"),
                         "--model", str(target / "assets/tiny_qwen3vl"), "--attn-implementation", "sdpa",
                         "--config", str(target / CONFIG)],
                        cwd=target, env_extra={"NON_MEGATRON": "true", "HF_HUB_OFFLINE": "1"}, timeout=300)
        assert res.ok, res.error
        return res.data["result"]
    return probe


def test_the_stand_ins_one_group_decays_norms_and_biases_the_source_never_decays(tmp_path):
    target = write_standin(tmp_path / "target", with_assets=True)
    cfg = target / CONFIG
    green = cfg.read_text()
    calls = []

    def never(*_):
        calls.append(1)
    # the green YAML decays nothing: nothing to compare, the probe is not run
    found, record = decay_group_findings(yaml.safe_load(green), DEFAULTS, _hf_recipe(tmp_path), CONFIG, never)
    assert found == [] and not calls and record["examined"] is False
    cfg.write_text(_with_fault(green))
    found, record = decay_group_findings(yaml.safe_load(cfg.read_text()), DEFAULTS, _hf_recipe(tmp_path), CONFIG,
                                         _probe_on(target))
    assert record["examined"] and record["exempting_fields"] == {} and record["candidate"] is None
    assert record["target_decayed"] == record["compared"] > record["source_decayed"] > 0  # one group: all decayed
    assert [f["code"] for f in found] == ["optimizer-decay-groups"] and found[0]["severity"] == "error"
    msg = found[0]["message"]
    assert found[0]["path"] == "training.weight_decay" and "training.weight_decay: 0" in msg
    assert "input_layernorm.weight (Qwen3VLTextRMSNorm)" in msg and ".bias (Linear)" in msg
    assert "no field that exempts" in msg
    assert any(w in msg for w in FAULT.fix)
    c = classify(f"[{found[0]['code']}] {found[0]['path']}: {msg}", finding_codes=["optimizer-decay-groups"])
    assert c.owner == "config"
    # the rules repair sets the key back to the value the config is derived with
    bad = yaml.safe_load(cfg.read_text())
    assert restore_values(bad, found, yaml.safe_load(green)) and bad["training"]["weight_decay"] == 0


def _result(candidate=None, fields=None):
    return {"examined": True, "compared": 10, "source_decayed": 4, "target_decayed": 10, "extra_count": 6,
            "extra": [{"name": "layers.*.norm.weight", "held_by": "RMSNorm"}, {"name": "layers.*.q.bias",
                                                                               "held_by": "Linear"}],
            "exempting_fields": fields or {}, "candidate": candidate}


def test_exemption_fields_the_trainer_does_not_read_are_said_so(tmp_path):
    cand = {"set": {"no_decay_modules": ["RMSNorm"], "no_decay_params": ["bias"]}, "removes": False}
    delivered = {"training": {"weight_decay": 0.1}}
    found, _ = decay_group_findings(delivered, DEFAULTS, _hf_recipe(tmp_path), CONFIG, lambda: _result(
        cand, {"no_decay_modules": "modules", "no_decay_params": "names"}))
    msg = found[0]["message"]
    assert found[0]["path"] == "training.weight_decay" and "do not change them" in msg
    assert "no_decay_modules: [RMSNorm]" in msg and "training.weight_decay: 0" in msg


def test_exemption_fields_the_trainer_applies_are_the_fix(tmp_path):
    cand = {"set": {"no_decay_modules": ["RMSNorm"], "no_decay_params": ["bias"]}, "removes": True}
    found, _ = decay_group_findings({"training": {"weight_decay": 0.1}}, DEFAULTS, _hf_recipe(tmp_path), CONFIG,
                                    lambda: _result(cand, {"no_decay_modules": "modules", "no_decay_params": "names"}))
    assert found[0]["path"] == "training.no_decay_modules"
    assert "training.no_decay_modules: [RMSNorm] and training.no_decay_params: [bias]" in found[0]["message"]


def test_nothing_decayed_beyond_the_source_and_an_unread_source_give_no_finding(tmp_path):
    clean = {**_result(), "extra": [], "extra_count": 0}
    assert decay_group_findings({"training": {"weight_decay": 0.1}}, DEFAULTS, _hf_recipe(tmp_path), CONFIG,
                                lambda: clean)[0] == []
    # a probe that could not run: not examined, never a pass or a failure
    found, record = decay_group_findings({"training": {"weight_decay": 0.1}}, DEFAULTS, _hf_recipe(tmp_path), CONFIG,
                                         lambda: None)
    assert found == [] and record["examined"] is False
    # a source whose training code decides its own decay groups: not read, the probe not run
    src = tmp_path / "own"
    (src / "train").mkdir(parents=True)
    (src / "train" / "train.py").write_text(
        "from transformers import Trainer, TrainingArguments\n\nclass T(Trainer):\n"
        "    def create_optimizer(self):\n        return super().create_optimizer()\n\n"
        "args = TrainingArguments(output_dir='o', weight_decay=0.1)\n")
    recipe = source_recipe(src)
    assert recipe["basis"] and recipe["no_decay"] is None and "train.py:4" in recipe["no_decay_why_not"]
    found, record = decay_group_findings({"training": {"weight_decay": 0.1}}, DEFAULTS, recipe, CONFIG,
                                         lambda: 1 / 0)
    assert found == [] and "builds its own decay groups" in record["why_not"]


def test_the_probes_exemption_candidates_follow_the_fields_names():
    sys.path.insert(0, str(PROBES_DIR))
    try:
        import decay_groups as dg
    finally:
        sys.path.remove(str(PROBES_DIR))
    training = SimpleNamespace(weight_decay=0.1, no_decay_modules=[], no_decay_params=[], lr=1e-4)
    fields = dg.exempting_fields(training)
    assert fields == {"no_decay_modules": "modules", "no_decay_params": "names"}
    extra = ["model.layers.0.norm.weight", "model.layers.0.q.bias", "model.layers.1.q.bias"]
    held = {"model.layers.0.norm.weight": "RMSNorm", "model.layers.0.q.bias": "Linear",
            "model.layers.1.q.bias": "Linear"}
    assert dg.candidate_values(extra, held, fields) == {"no_decay_modules": ["RMSNorm"], "no_decay_params": ["bias"]}
    assert dg.exempting_fields(SimpleNamespace(weight_decay=0.1)) == {}
    assert dg.fold("model.layers.12.mlp.3.bias") == "model.layers.*.mlp.*.bias"


def _g3(tmp_path, monkeypatch, weight_decay, probe_result):
    """G3 itself on a one-line launch script and a YAML with this weight decay, its probes replaced by their results
    (the schema check finds nothing; the decay-groups probe gives ``probe_result``)."""
    from types import SimpleNamespace

    from msmigrate.agent.routes.fsdp2.gates import config_gate
    from msmigrate.core.tool_result import ToolResult

    target, source = tmp_path / "t", tmp_path / "s"
    (target / "mindspeed_mm/fsdp/train").mkdir(parents=True)
    (target / "mindspeed_mm/fsdp/train/trainer.py").write_text("")
    (target / "examples/x").mkdir(parents=True)
    (target / CONFIG.replace("qwen3vl/qwen3vl_config", "x/c")).write_text(
        f"training:\n  lr: 1.0e-4\n  weight_decay: {weight_decay}\n")
    (target / "examples/x/run.sh").write_text("torchrun mindspeed_mm/fsdp/train/trainer.py examples/x/c.yaml\n")
    source.mkdir()
    tree = tmp_path / "tree.json"
    tree.write_text("{}")
    monkeypatch.setattr(config_gate, "config_check", lambda ctx, path, tree, device: ToolResult.success(
        findings=[], training_defaults=DEFAULTS))
    monkeypatch.setattr(config_gate, "dry_run_findings", lambda *a, **k: ([], {"examined": False, "why_not": "test"}))
    monkeypatch.setattr(config_gate, "bound_config", lambda deps, config: config)
    monkeypatch.setattr(config_gate, "decay_groups_check", lambda ctx, **kw: probe_result)
    deps = SimpleNamespace(ctx=SimpleNamespace(target=target, source=source), spec=SimpleNamespace())
    plan = {"config_path": "examples/x/c.yaml", "script_path": "examples/x/run.sh", "plugin_dir": "p",
            "model_id": "m", "route": "plugin"}
    return config_gate.gate_config(deps, {"plan": plan, "gates": {"G1": {"module_tree_file": str(tree)}}})


def test_a_chosen_decay_on_the_sources_own_groups_is_a_warning_and_on_norms_and_biases_an_error(tmp_path,
                                                                                                  monkeypatch):
    clean = {**_result(), "extra": [], "extra_count": 0}
    g3 = _g3(tmp_path / "a", monkeypatch, 0.1, clean)
    warned = [f for f in g3["evidence"][0]["metrics"]["findings"] if f["code"] == "optimizer-recipe"]
    assert g3["passed"], g3["summary"]
    assert warned and warned[0]["severity"] == "warning"
    g3 = _g3(tmp_path / "b", monkeypatch, 0.1, _result())
    assert not g3["passed"] and g3["finding_codes"] == ["optimizer-decay-groups"]
    assert g3["evidence"][0]["metrics"]["decay_groups"]["extra_count"] == 6
    assert _g3(tmp_path / "c", monkeypatch, 0, _result())["passed"]  # decay 0: nothing compared
