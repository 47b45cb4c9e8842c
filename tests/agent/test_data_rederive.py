"""The rules data phase re-derives the data path when G2 refutes the one it reused (branch A → the run's own
entries from the source's facts), and the work node applies a policy's re-decision of its own phase's plan keys
only. Evidence is G2's data parity or a traceback frame in the reused template / mm_plugin module, never a message."""

from __future__ import annotations

from types import SimpleNamespace

from langchain_core.messages import AIMessage

from msmigrate.agent.nodes.work import replanned
from msmigrate.agent.policies.rules import RulesPolicy  # (first: the rules package imports its phase scripts)
from msmigrate.agent.routes.fsdp2.rules.data_rederive import (derived_ids, parity_refutes, reuse_refuted,
                                                              yaml_selection)
from msmigrate.tools import yaml_roundtrip as rt

PLAN = {"data_branch": "A", "template": "qwen2vl", "mm_plugin": "qwen2_vl", "collator": "qwen3vl",
        "collator_drops": [], "model_id": "qwen2_vl", "data_plugin": "mindspeed_mm/fsdp/data/datasets/huggingface",
        "config_path": "examples/qwen2_vl/qwen2_vl_config.yaml", "data_contract": {"collator_derives": {},
                                                                                  "collator_drops": []}}
INVENTORY = {"templates": [{"id": "qwen2vl"}], "mm_plugins": [{"id": "qwen2_vl"}], "collators": [{"id": "qwen3vl"}]}


def _view(tmp_path, failure, g2, plan=PLAN, messages=()):
    state = {"plan": dict(plan), "last_failure": failure, "gates": {}, "gate_history": [{"gate": "G2", **g2}],
             "target_summary": INVENTORY}
    ctx = SimpleNamespace(target=tmp_path, source=tmp_path / "src", data_path=tmp_path / "src" / "data" / "t.json")
    return SimpleNamespace(state=state, ctx=ctx, messages=list(messages), phase="data")


MISMATCH = {"parity": {"data": {"prompt_match": True, "media_tokens": 10, "source_media_tokens": 8}},
            "failure_text": "ValueError: Image features and image tokens do not match"}


def test_parity_against_the_source_processor_refutes_the_reused_path():
    assert "10 media tokens where the source processor makes 8" in parity_refutes(MISMATCH)
    assert "prompt ids differ" in parity_refutes({"parity": {"data": {"prompt_match": False}}})
    assert parity_refutes({"parity": {"data": {"prompt_match": True, "media_tokens": 8,
                                               "source_media_tokens": 8}}}) is None
    assert parity_refutes({}) is None  # the pipeline failed before any parity: nothing measured, nothing refuted


def test_only_a_data_owned_g2_failure_on_a_reused_path_is_a_refutation(tmp_path):
    data_g2 = {"gate": "G2", "owner": "data"}
    assert reuse_refuted(_view(tmp_path, data_g2, MISMATCH))
    assert reuse_refuted(_view(tmp_path, {**data_g2, "owner": "model"}, MISMATCH)) is None
    assert reuse_refuted(_view(tmp_path, {**data_g2, "gate": "G4"}, MISMATCH)) is None
    assert reuse_refuted(_view(tmp_path, data_g2, MISMATCH, plan={**PLAN, "data_branch": "B"})) is None
    assert reuse_refuted(_view(tmp_path, None, MISMATCH)) is None
    # a records fault: the dataset code raised on a missing image, no parity, no frame in the template / mm_plugin
    records = {"failure_text": 'File "/t/mindspeed_mm/fsdp/data/datasets/huggingface/build.py", line 9, in load\n'
                               "FileNotFoundError: [Errno 2] No such file or directory: '/t/src/data/images/a.jpg'"}
    (tmp_path / "mindspeed_mm").mkdir()
    assert reuse_refuted(_view(tmp_path, data_g2, records)) is None


def test_a_place_in_the_reused_data_path_code_refutes_it_and_one_in_the_records_or_dataset_code_does_not(
        tmp_path, monkeypatch):
    from msmigrate.agent.routes.fsdp2.rules import data_rederive
    from msmigrate.knowledge.failure_context import Artifacts

    arts = Artifacts(data=(PLAN["data_plugin"], "mindspeed_mm/fsdp/data/data_utils/func_utils",
                           "mindspeed_mm/fsdp/data/dataloader/data_collator.py"), records=(str(tmp_path / "src"),))
    monkeypatch.setattr(data_rederive, "run_artifacts", lambda ctx, state, failed: (arts, None))
    data_g2 = {"gate": "G2", "owner": "data"}
    frame = {"failure_text": 'File "/w/mindspeed_mm/fsdp/data/data_utils/func_utils/collator.py", line 59, in __call__'
                             "\nAttributeError: 'bool' object has no attribute 'long'"}
    assert "collator.py:59" in reuse_refuted(_view(tmp_path, data_g2, frame))
    traced = {"summary": "data parity: pixel_values differ (the mm_plugin P (defined in "
                         "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py): its image loading differs)"}
    assert "mm_plugin.py" in reuse_refuted(_view(tmp_path, data_g2, traced))
    records = {"failure_text": 'File "/w/mindspeed_mm/fsdp/data/datasets/huggingface/build.py", line 9, in load\n'
                               "FileNotFoundError: No such file or directory: '" + str(tmp_path / "src/a.jpg") + "'"}
    assert reuse_refuted(_view(tmp_path, data_g2, records)) is None


def test_the_derived_ids_avoid_every_registered_id_and_keep_the_collator_the_contract_does_not_need(tmp_path):
    view = _view(tmp_path, {}, {})
    ids = derived_ids(view)
    # qwen2_vl is a registered mm_plugin: the derived template / mm_plugin id must not collide with it
    assert ids["template"] == ids["mm_plugin"] == "qwen2_vl_derived" and ids["data_branch"] == "B"
    assert ids["collator"] == "qwen3vl"
    view.state["plan"]["data_contract"] = {"collator_derives": {"mm_token_type_ids": "media"}, "collator_drops": []}
    assert derived_ids(view)["collator"] == "qwen2_vl_derived"


def test_the_delivered_yaml_selects_the_derived_entries(tmp_path):
    path = tmp_path / PLAN["config_path"]
    path.parent.mkdir(parents=True)
    path.write_text("data:\n  dataset_param:\n    basic_parameters:\n      template: qwen2vl  # chat format\n"
                    "  dataloader_param:\n    collate_param:\n      collator_id: qwen3vl\n")
    view = _view(tmp_path, {}, {})
    call = yaml_selection(view, {"template": "qwen2_vl_derived", "collator": "qwen3vl"})
    cfg = rt.load(call["args"]["content"])
    assert cfg["data"]["dataset_param"]["basic_parameters"]["template"] == "qwen2_vl_derived"
    assert "# chat format" in call["args"]["content"]  # a round trip: the user's comments stay
    path.write_text(call["args"]["content"])
    assert yaml_selection(view, {"template": "qwen2_vl_derived", "collator": "qwen3vl"}) is None


def test_a_policy_re_decides_only_its_own_phase_plan_keys_and_the_revision_is_recorded():
    update = {"data_branch": "B", "template": "qwen2_vl_derived", "model_id": "other", "config_path": "x.yaml"}
    plan = replanned(PLAN, "data", update, "G2 refuted the reused template")
    assert plan["template"] == "qwen2_vl_derived" and plan["data_branch"] == "B"
    assert plan["model_id"] == "qwen2_vl" and plan["config_path"] == PLAN["config_path"]  # not the data phase's
    assert "template 'qwen2vl' → 'qwen2_vl_derived'" in plan["revisions"][-1]["why"]
    assert replanned(PLAN, "config", update, "x") is None  # the config phase owns no such key
    assert replanned(PLAN, "data", {"template": "qwen2vl"}, "x") is None  # nothing changes


def test_the_rules_policy_hands_the_re_decision_to_the_work_node(tmp_path, monkeypatch):
    from msmigrate.agent.routes.fsdp2.rules import data as rules_data

    monkeypatch.setattr(rules_data.data_branch_b, "propose",
                        lambda view, plan=None, **kw: (f"entries {plan['template']}", []))
    view = _view(tmp_path, {"gate": "G2", "owner": "data"}, MISMATCH)
    decision = RulesPolicy().decide(SimpleNamespace(**vars(view), tools=[]))
    assert decision.plan_update["template"] == "qwen2_vl_derived" and "refuted" in decision.message.content
    # the next step (the plan now says B): the entries are written, G2 decides; no second re-decision
    view.state["plan"] = {**view.state["plan"], **decision.plan_update}
    again = RulesPolicy().decide(SimpleNamespace(**{**vars(view), "messages": [AIMessage(content="x")]}, tools=[]))
    assert again.plan_update is None and not again.message.tool_calls
