"""Checks that ran in a phase's last turn, right before a gate that passed, reach the next prompt: the model never
saw their results in its own phase (blind live run 12's player could not see why a warning was raised)."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, ToolMessage

from msmigrate.agent.handoff import CHECK_CHARS, handoff_record
from msmigrate.prompts.render import render
from msmigrate.prompts.sample_state import sample_node_vars


def _turn(results: dict[str, dict]) -> list:
    calls = [{"name": name, "args": {"model_id": "m", "plugins": ["p"]}, "id": f"c{i}"}
             for i, name in enumerate([*results, "finish_phase"])]
    msgs = [AIMessage(content="", tool_calls=calls)]
    for call in calls:
        body = results.get(call["name"], {"ok": True, "data": {"accepted": True}, "error": None})
        msgs.append(ToolMessage(content=json.dumps(body), tool_call_id=call["id"], name=call["name"]))
    return msgs


FORWARD = {"ok": True, "error": None, "data": {
    "argv": ["/venv/bin/python", "forward_smoke.py", "--target", "/x" * 400], "seconds": 1.2, "saved": "/run/f.json",
    "result": {"loss": 6.28, "finite": True, "output_keys": ["loss", "logits"] * 40,
               "loss_labels": {"alignment": "shifted: labels shifted twice"},
               "target_warnings": ["modeling: attention falls back to eager for InternVisionModel"]}}}


def test_the_last_turns_check_results_go_into_the_handoff_bounded_with_their_findings_first():
    record = handoff_record("model", {"G1": {"summary": "built"}}, _turn({"check_forward": FORWARD}),
                            {"summary": "done"}, {})
    (check,) = record["checks_unseen"]
    assert check["tool"] == "check_forward" and check["ok"] is True
    assert "falls back to eager" in check["found"] and "shifted twice" in check["found"]
    assert "forward_smoke.py" not in check["found"]  # the command line is the record's, not the reader's
    assert len(check["found"]) <= CHECK_CHARS + 40 and check["found"].index("warn") < check["found"].index("loss\"")


def test_checks_the_model_already_saw_are_not_repeated():
    # the check's own turn (its result then went to the model), then a turn that only finishes
    seen = [AIMessage(content="", tool_calls=[{"name": "check_forward", "args": {}, "id": "c"}]),
            ToolMessage(content=json.dumps(FORWARD), tool_call_id="c", name="check_forward")]
    last = [AIMessage(content="", tool_calls=[{"name": "finish_phase", "args": {}, "id": "f"}]),
            ToolMessage(content='{"ok": true}', tool_call_id="f", name="finish_phase")]
    record = handoff_record("model", {}, [*seen, *last], {"summary": "done"}, {})
    assert record["checks_unseen"] == []


def test_the_next_phases_prompt_shows_them():
    values = sample_node_vars("data")
    record = handoff_record("model", {"G1": {"summary": "built"}}, _turn({"check_forward": FORWARD}),
                            {"summary": "done"}, {})
    text = render("data", **{**values, "handoff": [record]})
    assert "check_forward" in text and "falls back to eager" in text and "not shown before" in text
