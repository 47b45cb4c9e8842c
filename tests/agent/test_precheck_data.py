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
