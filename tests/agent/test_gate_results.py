"""The "Gate results so far" block after a retry: the latest run of each gate, numbered, with the failure being
repaired still shown (live runs 7/8 re-entered the model phase after G4 failed, and the block showed G0 alone while the
hand-off quoted the G2/G3 proofs of the earlier pass)."""

from __future__ import annotations

from msmigrate.agent.gate_results import latest_gate_results
from msmigrate.agent.policies.base import PolicyView
from msmigrate.agent.policies.llm import prompt_vars
from msmigrate.agent.state import gates_before
from msmigrate.core.run_context import RunContext
from msmigrate.prompts.render import render


def rec(gate, passed, summary):
    return {"gate": gate, "passed": passed, "summary": summary}


HISTORY = [rec("G0", True, "ok"), rec("G1", True, "g1 first"), rec("G2", True, "g2 first"),
           rec("G3", True, "g3 first"), rec("G4", False, "loss NaN at iteration 1"),
           # the model phase repaired the plugin, G1 ran again and passed; G4 failed once more on the same NaN
           rec("G1", True, "g1 second"), rec("G2", True, "g2 second"), rec("G3", True, "g3 second"),
           rec("G4", False, "loss NaN again")]


def test_latest_run_per_gate_with_its_number_and_whether_it_still_stands():
    gates = gates_before({r["gate"]: r for r in HISTORY}, "model")  # what classify leaves: the model phase re-entered
    rows = {r["gate"]: r for r in latest_gate_results(gates, HISTORY)}
    assert list(rows) == ["G0", "G1", "G2", "G3", "G4"]
    assert rows["G4"] == {"gate": "G4", "passed": False, "summary": "loss NaN again", "attempt": 2,
                          "current": False}
    assert rows["G1"]["summary"] == "g1 second" and rows["G1"]["attempt"] == 2 and not rows["G1"]["current"]
    assert rows["G0"]["current"] and rows["G0"]["attempt"] == 1


def test_the_model_prompt_after_a_retry_shows_the_failure_it_repairs(tmp_path):
    ctx = RunContext(run_id="unit", run_dir=tmp_path / "run", source=tmp_path / "src", target=tmp_path / "tgt",
                     model_name="patchlm")
    plan = {"route": "custom", "data_branch": "B", "model_id": "patchlm", "template": "patchlm",
            "collator": "qwen3vl", "similar_case": "examples/qwen3vl/qwen3vl_config.yaml", "reasons": ["custom"]}
    state = {"attempts": {"model": 2}, "plan": plan, "gate_history": HISTORY,
             "gates": gates_before({r["gate"]: r for r in HISTORY}, "model")}
    view = PolicyView(phase="model", state=state, messages=[], tools=[], ctx=ctx)
    text = render("model", **prompt_vars(view))
    block = text.split("## Gate results so far", 1)[1].split("\n## ", 1)[0]
    assert "- G4: FAIL (run 2; the failure being repaired: it runs again when its phase comes round) — loss NaN " \
           "again" in block
    assert "- G1: PASS (run 2; no longer the current proof" in block
    assert "g1 first" not in block and "loss NaN at iteration 1" not in block  # only the latest run of each
    assert "- G0: PASS (run 1) — ok" in block


def test_the_attempt_line_counts_the_first_visit_and_every_tolerated_failure(tmp_path):
    # phase_attempts = 4 tolerates 4 failures: the phase runs 5 times ("attempt 5 of 4" confused a blind player)
    ctx = RunContext(run_id="unit", run_dir=tmp_path / "run", source=tmp_path / "src", target=tmp_path / "tgt",
                     model_name="patchlm")
    state = {"attempts": {"config": 4}, "max_attempts": 4, "plan": {}, "gate_history": [], "gates": {}}
    values = prompt_vars(PolicyView(phase="config", state=state, messages=[], tools=[], ctx=ctx))
    assert (values["attempt"], values["max_attempts"]) == (5, 5)
