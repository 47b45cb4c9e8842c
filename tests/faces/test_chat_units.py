"""The chat's pure pieces: launch-edit parsing, question detection and state answers, tool-outcome gists."""

from __future__ import annotations

from msmigrate.faces.chat.answers import answer, is_question
from msmigrate.faces.chat.render import _tool_outcome
from msmigrate.faces.chat.session import parse_edit

STATE = {"phase": "config", "plan": {"template": "qwen2vl", "data_branch": "A", "model_id": "qwen2_vl",
                                     "reasons": ["template qwen2vl fits"]},
         "gates": {"G1": {"passed": True}, "G2": {"passed": False}}, "counters": {"launches": 2, "policy_steps": 5},
         "last_failure": {"gate": "G2", "case_id": "missing_mm_token_type_ids", "owner": "data", "diagnosis": "add it"},
         "instructions": "use sdpa\nkeep lr"}


def test_parse_edit():
    assert parse_edit("nproc_per_node=4 device=cpu gate_train_iters=8") == {
        "nproc_per_node": 4, "device": "cpu", "gate_train_iters": 8}
    assert "cannot be edited" in parse_edit("lr=0.1")
    assert "KEY=VALUE" in parse_edit("nproc_per_node")
    assert "at least one" in parse_edit("")


def test_questions_are_answered_from_state():
    assert is_question("which template?") and is_question("why did G2 fail") and not is_question("use 4 ranks")
    text = answer("which template and data branch, and why?", STATE)
    assert "template: qwen2vl" in text and "data branch: A" in text and "template qwen2vl fits" in text
    assert "missing_mm_token_type_ids" in answer("what failed?", STATE)
    assert "G1 PASS, G2 FAIL" in answer("which gates passed?", STATE)
    # a PASS whose commit left the branch (after /undo) is not called a PASS in an answer either
    stale = answer("which gates passed?", STATE, {"G1": "it ran on commit abc, which the work branch no longer holds"})
    assert "G1 stale, re-run (it ran on commit abc" in stale and "G1 PASS" not in stale
    assert "launches 2" in answer("how many launches so far?", STATE)
    assert "use sdpa | keep lr" in answer("what instructions did I give?", STATE)
    assert "not decided yet" in answer("which template?", {"phase": "prepare"})
    assert answer("is it done?", STATE).startswith("phase config")


def test_tool_outcome_reads_cut_observations():
    assert _tool_outcome('{"ok": true, "data": {"path": "examples/m/m.yaml", "diff": "@@ -1') == "ok examples/m/m.yaml"
    assert _tool_outcome('{"ok": false, "data": {"path": "x.py"}, "error": "refused: outside the editable') == \
        "failed x.py: refused: outside the editable"
    assert _tool_outcome("not json") == "not json"
