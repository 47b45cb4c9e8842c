"""G2's test of a data failure against the YAML's data settings as derived (routes/fsdp2/gates/data_settings.py):
the check is run again on a copy of the YAML with the differing settings set as derived, and only a pass there makes
the remedy line the classify node reads as config; the settings found as derived are recorded either way."""

from __future__ import annotations

from types import SimpleNamespace

import yaml

from msmigrate.agent.routes.fsdp2.gates import data_settings

DELIVERED = {"data": {"dataset_param": {"basic_parameters": {"template": "qwen2vl", "train_on_prompt": True,
                                                             "dataset_dir": "./data"},
                                        "attr": {"role_tag": "role", "user_tag": "user"}}}}
DERIVED = {"data": {"dataset_param": {"basic_parameters": {"template": "qwen2vl", "train_on_prompt": False,
                                                           "dataset_dir": "/src/data"},
                                      "attr": {"role_tag": "role", "user_tag": "user"}}}}


def _run(tmp_path, monkeypatch, passes):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(DELIVERED))
    monkeypatch.setattr(data_settings, "derived_data", lambda deps, state: DERIVED)
    deps = SimpleNamespace(ctx=SimpleNamespace(run_dir=tmp_path))
    seen = []

    def check(path):
        seen.append(yaml.safe_load(path.read_text()))
        return passes

    record = data_settings.settings_check(deps, {"plan": {"config_path": "examples/x/c.yaml"}}, config, check)
    return record, seen


def test_a_pass_with_the_derived_settings_names_the_key_to_set(tmp_path, monkeypatch):
    record, seen = _run(tmp_path, monkeypatch, passes=True)
    assert record["differ"] == {"data.dataset_param.basic_parameters.train_on_prompt": [True, False]}
    assert seen[0]["data"]["dataset_param"]["basic_parameters"]["train_on_prompt"] is False
    assert seen[0]["data"]["dataset_param"]["basic_parameters"]["dataset_dir"] == "./data"  # inputs untouched
    assert record["passes_as_derived"] is True
    assert "set `data.dataset_param.basic_parameters.train_on_prompt` to False" in record["problems"][0]
    assert "examples/x/c.yaml" in record["problems"][0]


def test_a_failure_with_them_too_blames_no_setting_and_records_the_derived_ones(tmp_path, monkeypatch):
    record, _ = _run(tmp_path, monkeypatch, passes=False)
    assert record["passes_as_derived"] is False and record["problems"] == []
    assert "data.dataset_param.attr.role_tag" in record["same"]


def test_a_setting_written_at_another_level_is_set_where_it_is_read(tmp_path, monkeypatch):
    """The template pasted one level up: the derived section's key is not set where the target reads it."""
    import copy

    moved = copy.deepcopy(DELIVERED)
    moved["data"]["dataset_param"]["template"] = moved["data"]["dataset_param"]["basic_parameters"].pop("template")
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(moved))
    monkeypatch.setattr(data_settings, "derived_data", lambda deps, state: DERIVED)
    seen = []
    record = data_settings.settings_check(SimpleNamespace(ctx=SimpleNamespace(run_dir=tmp_path)),
                                          {"plan": {"config_path": "c.yaml"}}, config,
                                          lambda path: seen.append(yaml.safe_load(path.read_text())) or True)
    assert record["differ"]["data.dataset_param.basic_parameters.template"] == ["<not set>", "qwen2vl"]
    assert seen[0]["data"]["dataset_param"]["basic_parameters"]["template"] == "qwen2vl"
    assert "set `data.dataset_param.basic_parameters.template` to 'qwen2vl' (it is not set there)" in \
        record["problems"][0]
