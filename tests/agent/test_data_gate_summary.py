"""G2's summary names what was delivered: the dataset_type / template / collator of the YAML it checked, and where
they differ from the plan (live run 8 delivered dataset_type internvl_chat; G2 said "via huggingface")."""

from __future__ import annotations

import yaml

from msmigrate.agent.routes.fsdp2.gates.data_gate import delivered_via

PLAN = {"dataset_type": "huggingface", "template": "internvl2_5", "collator": "internvl_chat"}


def write(tmp_path, dataset_type, template="internvl2_5", collator="internvl_chat"):
    cfg = {"data": {"dataset_param": {"dataset_type": dataset_type, "basic_parameters": {"template": template}},
                    "dataloader_param": {"collate_param": {"collator_id": collator}}}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_the_summary_names_the_delivered_dataset_type(tmp_path):
    said = delivered_via(write(tmp_path, "internvl_chat"), PLAN)
    assert said == ("internvl_chat/internvl2_5/internvl_chat (delivered: dataset_type internvl_chat where the plan "
                    "said huggingface)")


def test_as_planned_says_nothing_more_and_a_missing_field_falls_back(tmp_path):
    assert delivered_via(write(tmp_path, "huggingface"), PLAN) == "huggingface/internvl2_5/internvl_chat"
    (tmp_path / "empty.yaml").write_text("data: {}\n")
    assert delivered_via(tmp_path / "empty.yaml", PLAN) == "huggingface/internvl2_5/internvl_chat"
