"""The user's source step from the plan to G4's training-parity probe and into the report, without a probe run:
the plan copies the step into the run folder and records it; the gate hands the probe that copy
(``--source-step COPY:function``), and the record and the report name the user's own file ("Source step: the user's
step FILE:function"). A source without loss or training code and no step: the plan and G4's "not comparable" tell the
user of the option."""

from __future__ import annotations

from types import SimpleNamespace

from msmigrate.agent.config import LaunchSettings
from msmigrate.agent.nodes.plan import source_step_facts
from msmigrate.agent.report import render_report
from msmigrate.agent.routes.fsdp2.gates.parity import training_parity_check
from msmigrate.core.tool_result import ToolResult
from msmigrate.tools import target_checks

STEP = "import torch.nn.functional as F\n\n\ndef training_step(model, batch):\n    return model(**batch)['logits'].sum()\n"
NO_LABELS = {"forward": {"signature": "forward(self, input_ids, attention_mask=None, image_patches=None)"}}


def _deps(tmp_path, source_step=None):
    ctx = SimpleNamespace(probe_timeout_s=300.0, approval=False, code_approved=True, target=tmp_path / "mm",
                          source=tmp_path / "src", runtime_python="python", run_dir=tmp_path / "run")
    spec = SimpleNamespace(source_step=source_step, launch=LaunchSettings())
    return SimpleNamespace(ctx=ctx, spec=spec)


def _plan(extra):
    return {"plugin_dir": "mindspeed_mm/fsdp/models/patchlm", "model_id": "patchlm", "route": "custom",
            "config_path": "examples/patchlm/patchlm_config.yaml", **extra}


def test_the_plan_copies_the_step_and_the_probe_gets_the_copy(tmp_path, monkeypatch):
    user = tmp_path / "mine" / "step.py"
    user.parent.mkdir()
    user.write_text(STEP)
    deps = _deps(tmp_path, f"{user}:training_step")
    facts = source_step_facts(deps, NO_LABELS, {"kind": "hf"})
    record = facts["source_step"]
    copy = tmp_path / "run" / "source_step" / "step.py"
    assert copy.read_text() == STEP and record["probe_ref"] == f"{copy}:training_step" and record["form"] == "loss"
    assert "the user's step" in facts["source_step_reason"] and str(user) in facts["source_step_reason"]
    assert "source_gives_no_loss" not in facts  # the step is there: nothing to advise

    seen = {}

    def probe(python, name, args, **kw):
        seen.update(name=name, args=args)
        return ToolResult.success(argv=["python", "training_parity.py", *args], returncode=0, result={
            "passed": True, "problems": [], "steps": 2, "source_step": f"the user's step {copy}:training_step: "
            "its loss on each micro batch (labels as the target feeds them) + torch.optim.AdamW",
            "source": {"loss": [2.0, 1.9], "grad_norm": [1.0, 0.9]},
            "target": {"loss": [2.0, 1.9], "grad_norm": [1.0, 0.9]}, "fixed_batch": {"before": 2.0, "after": 1.8,
                                                                                      "fall": 0.1}})

    monkeypatch.setattr(target_checks, "run_probe", probe)
    ev, problems, parity = training_parity_check(deps, {"plan": _plan(facts)})
    assert seen["name"] == "training_parity" and not problems
    assert seen["args"][seen["args"].index("--source-step") + 1] == f"{copy}:training_step"
    assert parity["source_step"].startswith(f"the user's step {user}:training_step: its loss")
    assert parity["user_source_step"]["sha256"] == record["sha256"] and parity["user_source_step"]["copy"] == str(copy)
    gates = {"G4": {"gate": "G4", "passed": True, "summary": "", "evidence": [ev], "parity": {"training": parity}}}
    text = render_report({"gates": gates, "plan": _plan(facts)}, "", False)
    assert f"Source step: the user's step {user}:training_step" in text


def test_without_a_step_nothing_changes_and_a_source_without_loss_is_told_of_the_option(tmp_path, monkeypatch):
    deps = _deps(tmp_path)
    assert source_step_facts(deps, {"forward": {"signature": "forward(self, input_ids, labels=None)"}}, None) == {}
    assert source_step_facts(deps, {"forward": {"signature": "forward(self, input_ids, **kwargs)"}}, None) == {}
    assert source_step_facts(deps, NO_LABELS, {"kind": "own"}) == {}  # its own training code is the oracle
    facts = source_step_facts(deps, NO_LABELS, {"kind": "hf"})
    assert "the source gives no loss" in facts["source_gives_no_loss"]
    assert "--source-step FILE.py:function" in facts["source_gives_no_loss"]
    seen = {}

    def probe(python, name, args, **kw):
        seen["args"] = args
        return ToolResult.success(argv=args, returncode=0, result={
            "passed": None, "problems": [], "why_not": "the source's own forward takes no labels: its loss cannot be "
                                                       "computed on the target pipeline's batches"})

    monkeypatch.setattr(target_checks, "run_probe", probe)
    _, problems, parity = training_parity_check(deps, {"plan": _plan(facts)})
    assert "--source-step" not in seen["args"] and not problems and parity["status"] == "not_comparable"
    assert "--source-step FILE.py:function" in parity["why_not"] and "user_source_step" not in parity
