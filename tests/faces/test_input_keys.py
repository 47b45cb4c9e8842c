"""Our own inputs (spec, batch manifest, eval task, approval edits) refuse unknown keys and bad values with one line
naming the key and the closest valid one — never a silently ignored typo."""

from __future__ import annotations

from pathlib import Path

import pytest

from msmigrate.agent.config import RunSpec, launch_edit_error

BASE = {"source": "src", "target": "mm", "model_name": "qwen2_vl"}


def _error(raw) -> str:
    with pytest.raises(ValueError) as exc:
        RunSpec.from_dict(raw, Path("/tmp"))
    return str(exc.value)


def test_misspelt_top_level_key_names_the_closest():
    msg = _error({**BASE, "budget": {"launches": 3}})
    assert "unknown key 'budget'" in msg and "did you mean 'budgets'" in msg and "\n" not in msg


def test_misspelt_nested_key_names_the_closest():
    assert "did you mean 'nproc_per_node'" in _error({**BASE, "launch": {"nproc": 2}})
    assert "unknown key 'budgets.launchs'" in _error({**BASE, "budgets": {"launchs": 2}})


def test_spec_file_with_a_typo_is_refused(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("source: src\ntarget: mm\nmodel_name: qwen2_vl\naproval: true\n")
    with pytest.raises(ValueError, match="did you mean 'approval'"):
        RunSpec.load(spec)
    spec.write_text("source: [unclosed\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        RunSpec.load(spec)


@pytest.mark.parametrize("edit, words", [
    ({"gate_train_iters": 2}, ["gate_train_iters", "greater than or equal to 5"]),
    ({"nproc_per_node": 0}, ["nproc_per_node", "greater than or equal to 1"]),
    ({"nnodes": "abc"}, ["nnodes", "valid integer", "'abc'"]),
])
def test_approval_edits_are_checked_like_a_spec(edit, words):
    msg = launch_edit_error({}, edit)
    assert msg and all(w in msg for w in words), msg
    assert launch_edit_error({}, {"nproc_per_node": 4, "gate_train_iters": 8}) is None


def test_chat_edit_parser_refuses_invalid_values():
    from msmigrate.faces.chat.session import parse_edit

    assert "refused" in parse_edit("nnodes=abc")
    assert "refused" in parse_edit("gate_train_iters=3")
    assert parse_edit("nproc_per_node=4") == {"nproc_per_node": 4}
    assert "did you mean 'nproc_per_node'" in parse_edit("nproc=4")


def test_manifest_keys(tmp_path):
    from msmigrate.faces.batch.manifest import load_manifest

    m = tmp_path / "m.yaml"
    m.write_text("defualts: {policy: rules}\nitems:\n  - spec: {source: s, target: t, model_name: ab}\n")
    assert "did you mean 'defaults'" in load_manifest(m).error
    m.write_text("items:\n  - id: a\n    sepc: x.yaml\n    spec: {source: s, target: t, model_name: ab}\n")
    assert "unknown key 'sepc' in item 0" in load_manifest(m).error
    m.write_text("items:\n  - spec: {source: s, target: t, model_name: ab, polcy: rules}\n")
    assert "did you mean 'policy'" in load_manifest(m).error
    m.write_text("defaults: {launch: {nodes: 2}}\nitems:\n  - spec: {source: s, target: t, model_name: ab}\n")
    assert "unknown key 'nodes' in defaults.launch" in load_manifest(m).error


def test_eval_task_keys(tmp_path):
    from msmigrate.faces.eval.suite import load_suite

    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\ntasks:\n  - fixture: qwen2_vl\n    expct: {template: qwen2_vl}\n")
    assert "did you mean 'expect'" in load_suite(suite).error
    suite.write_text("name: s\ntasks:\n  - fixture: qwen2_vl\n    spec: {budgets: {launchez: 2}}\n")
    assert "did you mean 'launches'" in load_suite(suite).error
    suite.write_text("name: s\ntrails: 2\ntasks:\n  - fixture: qwen2_vl\n")
    assert "did you mean 'trials'" in load_suite(suite).error
    suite.write_text("name: s\ntasks:\n  - fixture: qwen2_vl\n    expect: {templte: x}\n")
    assert "did you mean 'template'" in load_suite(suite).error
