"""Source analysis never crashes: every derivation from the source that fails (chat format, media expansion, the
processor the runtime loads, architecture, attention facts) becomes a recorded fact "could not derive X: …" that the
plan carries and the phase prompts show — never an exception out of the plan node."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from msmigrate.agent.nodes import plan as plan_mod
from msmigrate.agent.nodes.plan import make_plan, make_plan_node
from msmigrate.prompts.render import render
from msmigrate.prompts.sample_state import sample_node_vars
from msmigrate.testbeds.fixtures import chat_templates as ct

RAISING_TEMPLATES = [
    ct.STRING_CHATML,  # TypeError on structured content (a published remote-code VLM template)
    "{{ 1 // 0 }}",  # ZeroDivisionError on every render
    "{% for m in messages %}{{ m['content'] + 1 }}{% endfor %}",  # TypeError on every render
    "{{ raise_exception('only user turns') }}",  # an undefined callable the template calls
]


class Trajectory:
    def __init__(self):
        self.records = []

    def append(self, kind, **data):
        self.records.append((kind, data))


def custom_src(template: str) -> dict:
    return {"needs_trust_remote_code": True, "architectures": ["OddModel"], "model_type": "odd",
            "custom_code_files": ["modeling_odd.py"], "auto_map": {"AutoModel": "modeling_odd.OddModel"},
            "forward": {"source": "static", "signature": "forward(self, data, **kwargs)"},
            "tokens": {"media_tokens": {"<image>": 5}, "special_tokens": {"eos_token": "<|im_end|>"}},
            "chat_template": {"text": template}}


def node_deps(tmp_path, template: str):
    source = tmp_path / "source"
    source.mkdir()
    (source / "config.json").write_text(json.dumps({"architectures": ["OddModel"], "model_type": "odd",
                                                    "auto_map": {"AutoModel": "modeling_odd.OddModel"}}))
    ctx = SimpleNamespace(model_name="odd", source=source, target=tmp_path / "target", runtime_python="python",
                          run_dir=tmp_path / "run", data_path=None, probe_timeout_s=300.0)
    deps = SimpleNamespace(ctx=ctx, spec=None, trajectory=Trajectory(), emit=lambda *a, **k: None)
    state = {"source_summary": custom_src(template),
             "target_summary": {"templates": [], "similar_cases": [{"example": "e.yaml", "why": []}]}}
    return deps, state


@pytest.mark.parametrize("template", RAISING_TEMPLATES)
def test_a_source_template_raising_anything_yields_a_plan(tmp_path, monkeypatch, template):
    def boom(*_a, **_k):
        raise RuntimeError("the runtime is gone")

    # every probe of the source fails too: the plan still comes, with each failure recorded
    monkeypatch.setattr(plan_mod, "probe_runtime_processor", boom)
    deps, state = node_deps(tmp_path, template)
    out = make_plan_node(deps)(state)
    plan = out["plan"]
    assert out["phase"] == "model" and plan["route"] == "custom"
    failed = plan.get("could_not_derive") or []
    assert any(f.startswith("could not derive the processor the runtime loads") and "RuntimeError" in f
               and "the runtime is gone" in f for f in failed)
    if template == ct.STRING_CHATML:  # renders with string content: derived, the content form recorded
        assert plan["chat_content_form"] == "string"
        assert not any("chat format" in f for f in failed)
    else:
        assert any(f.startswith("could not derive the chat format") for f in failed), failed
    assert all(f in plan["reasons"] for f in failed)  # the reasons are what every phase prompt shows


def test_failed_derivations_reach_the_phase_prompt(tmp_path, monkeypatch):
    def boom(*_a, **_k):
        raise ValueError("bad preprocessor_config.json")

    monkeypatch.setattr(plan_mod, "architecture_kind", boom)
    monkeypatch.setattr(plan_mod, "probe_runtime_processor", lambda *a, **k: None)
    deps, state = node_deps(tmp_path, "{{ 1 // 0 }}")
    plan = make_plan_node(deps)(state)["plan"]
    assert plan["architecture"] == "decoder"  # the assumed kind, said so in the reasons
    variables = {**sample_node_vars("model"), "plan": {**plan, "branch": plan["data_branch"]}}
    text = render("model", **variables)
    assert "could not derive the architecture kind (config.json): ValueError: bad preprocessor_config.json" in text
    assert "could not derive the chat format" in text


def test_source_reader_failures_reach_the_plan():
    src = {**custom_src(ct.QWEN2_VL), "could_not_derive": ["could not derive the attention facts: SyntaxError"]}
    deps = SimpleNamespace(ctx=SimpleNamespace(model_name="odd", source="/nonexistent"))
    plan = make_plan(deps, {"source_summary": src, "target_summary": {"templates": [], "similar_cases": [{}]}})
    assert plan["could_not_derive"] == ["could not derive the attention facts: SyntaxError"]
    assert plan["chat_content_form"] == "structured"


def test_the_phase_prompts_state_the_sources_own_training_contract():
    """Where the source trains through its own code, the model prompt says how its loss path works (call kind,
    where the loss is, pre-shifted labels) and the data prompt names its dataset as G2's oracle."""
    facts = {"kind": "own", "entry": ["finetune/trainer.py"], "forward_call": "one dict",
             "loss_at": "finetune/trainer.py:7 FamilyTrainer.compute_loss", "label_convention": "pre-shifted",
             "dataset": {"class": "SupervisedDataset", "file": "finetune/dataset.py", "line": 5},
             "collator": {"name": "data_collator", "file": "finetune/dataset.py", "line": 40},
             "data_keys": ["image", "conversations", "role", "content"], "masking": [], "trainer": None}
    plan = {**sample_node_vars("model")["plan"], "source_training": facts,
            "source_training_contract": ["the source's own training code: finetune/trainer.py"]}
    model = render("model", **{**sample_node_vars("model"), "plan": plan})
    assert "as its\n  training code does (one dict)" in model and "FamilyTrainer.compute_loss" in model
    assert "Its labels are pre-shifted" in model and "the source's own training code: finetune/trainer.py" in model
    data = render("data", **{**sample_node_vars("data"), "plan": plan})
    assert "G2 runs its\n  SupervisedDataset (finetune/dataset.py) and data_collator" in data
    assert "['image', 'conversations', 'role', 'content']" in data
