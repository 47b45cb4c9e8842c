"""G0 catches a sample-data file that cannot be read as records (0 bytes, not JSON) with one line saying so, instead
of a JSONDecodeError traceback from the data gate later."""

from __future__ import annotations

import json

import pytest
from agent_fakes import FakeGates, ScriptedPolicy, make_run

from msmigrate.agent.nodes.prepare import data_file_problems


@pytest.mark.parametrize("content, words", [
    ("", ["is empty", "0 bytes"]),
    ("  \n", ["is empty"]),
    ("not json{", ["not JSON or JSON Lines", "line 1 column 1"]),
    ("[]", ["holds no records"]),
    ("[1, 2]", ["holds no records"]),
])
def test_unreadable_data_files_are_named(tmp_path, content, words):
    f = tmp_path / "train.json"
    f.write_text(content)
    problems = data_file_problems(f)
    assert len(problems) == 1 and all(w in problems[0] for w in words), problems


def test_json_and_json_lines_records_pass(tmp_path):
    rec = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    (tmp_path / "a.json").write_text(json.dumps([rec, rec]))
    (tmp_path / "b.jsonl").write_text(json.dumps(rec) + "\n" + json.dumps(rec) + "\n")
    assert data_file_problems(tmp_path / "a.json") == [] and data_file_problems(tmp_path / "b.jsonl") == []


def test_g0_fails_on_an_empty_data_file_before_any_gate(fast_prepare, tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("")
    gates = FakeGates()
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates, data=empty)
    try:
        out = run.drive()
        assert out["exit_status"] == "precheck_failed" and "is empty" in out["exit_detail"]
        assert str(empty) in out["exit_detail"] and gates.calls == []
    finally:
        run.close()


def test_a_g0_stop_says_whose_the_fix_is_where_g0_knows_it(fast_prepare, tmp_path, monkeypatch):
    """Records that are there but unusable are the data's, a runtime probe that fails is the environment's; a spec
    input (a source folder without config.json) is no phase's: no owner. The exit line says the owner."""
    import msmigrate.agent.nodes.prepare as prepare
    from msmigrate.agent.exit_line import todo_for
    from msmigrate.tools.runtime import ToolResult

    empty = tmp_path / "empty.json"
    empty.write_text("")
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), FakeGates(), data=empty)
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["gates"]["G0"]["owner"] == "data" and "(owner: data)" in todo_for(out)
    monkeypatch.setattr(prepare, "run_probe", lambda *a, **k: ToolResult.failure(
        "probe env_probe was killed by SIGSEGV (exit -11)"))
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), FakeGates())
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["exit_status"] == "precheck_failed" and "target runtime probe failed" in out["exit_detail"]
    assert out["gates"]["G0"]["owner"] == "environment" and "(owner: environment)" in todo_for(out)
    (fast_prepare["source"] / "config.json").unlink()
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), FakeGates())
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["gates"]["G0"]["owner"] is None and todo_for(out).startswith("fix the inputs G0 names below")


def test_data_sample_shows_the_data_phase_the_first_record(tmp_path):
    from msmigrate.agent.nodes.prepare import SAMPLE_CHARS, data_sample

    rec = {"conversations": [{"from": "human", "value": "<image>hi"}, {"from": "gpt", "value": "yo"}],
           "images": ["a.png"]}
    (tmp_path / "a.jsonl").write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "id": 7}) + "\n")
    sample = data_sample(tmp_path / "a.jsonl")
    assert sample["records"] == 2 and sample["keys"] == ["conversations", "id", "images"]
    assert json.loads(sample["first_record"]) == rec
    (tmp_path / "long.json").write_text(json.dumps([{"text": "x" * 5000}]))
    cut = data_sample(tmp_path / "long.json")["first_record"]
    assert len(cut) < SAMPLE_CHARS + 20 and cut.endswith("…(cut)")
    (tmp_path / "bad.json").write_text("not json{")
    assert data_sample(tmp_path / "bad.json") == {} and data_sample(None) == {}


def test_prompt_target_names_where_each_kind_is_registered():
    from msmigrate.agent.handoff import WHERE_FILES, compact_target

    inv = {"ids": {"model": ["a"]}, "headline": "h",
           "model_ids": [{"id": f"m{i}", "file": f"models/m{i}.py"} for i in range(WHERE_FILES + 2)],
           "templates": [{"id": "t1", "file": "t.py"}, {"id": "t2", "file": "t.py"}], "collators": [],
           "dataset_types": [{"id": "hf", "file": "d.py", "line": 9, "extra": {"signature": "build(a, b=None)"}},
                             {"id": "cls", "file": "e.py", "line": 3, "extra": {"is_class": True}}]}
    assert compact_target(inv)["dataset_builders"] == ["hf: d.py:9 build(a, b=None)"]  # the builder's contract
    where = compact_target(inv)["registered_in"]
    assert where["template"] == ["t.py"] and "collator" not in where
    assert len(where["model"]) == WHERE_FILES + 1 and where["model"][-1] == "+2 more"
    assert "registered_in" not in compact_target({"ids": {}, "headline": ""})
