"""G1 proved the model plugin; when a later phase edits a file under the plugin dir (a data-phase repair changing
the model's init, say), G1 runs again before that phase's gates count, and a failing re-run sends the run back to
the model phase instead of letting G2..G6 pass on an unproven plugin."""

from __future__ import annotations

import json

from agent_fakes import FakeGates, ScriptedPolicy, echo_tool, make_run

from msmigrate.agent.policies.base import tool_call
from msmigrate.tools.file_writer import file_writer_tools

PLUGIN = "mindspeed_mm/fsdp/models/fakevl"


def write(path: str, text: str) -> dict:
    return tool_call("write_file", {"path": path, "content": text, "reason": "test"}, prefix="w")


def drive(fast_prepare, tmp_path, script, gates):
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(script), gates,
                   tools=lambda ctx: [echo_tool(), *file_writer_tools(ctx)])
    try:
        final = run.drive()
    finally:
        run.close()
    records = [json.loads(line) for line in (run.ctx.run_dir / "trajectory.jsonl").read_text().splitlines()]
    return final, records


def test_g1_runs_again_when_the_data_phase_edits_the_model_plugin(fast_prepare, tmp_path):
    gates = FakeGates()
    script = {"model": [[write(f"{PLUGIN}/modeling_fakevl.py", "X = 1\n")]],
              "data": [[write(f"{PLUGIN}/modeling_fakevl.py", "X = 2\n"),
                        write("mindspeed_mm/fsdp/data/datasets/fakevl/__init__.py", "Y = 1\n")]]}
    final, records = drive(fast_prepare, tmp_path, script, gates)
    assert final["exit_status"] == "success", final.get("exit_detail")
    assert gates.calls == ["G1", "G1", "G2", "G3", "G4", "G5", "G6"]
    rerun = [r for r in records if r["kind"] == "gate_rerun"]
    assert [(r["phase"], r["gate"], r["changed"]) for r in rerun] == [("data", "G1", [f"{PLUGIN}/modeling_fakevl.py"])]
    g1 = [r for r in records if r["kind"] == "gate" and r["gate"] == "G1"]
    assert [r["phase"] for r in g1] == ["model", "data"] and g1[0]["target_commit"] != g1[1]["target_commit"]


def test_no_rerun_when_later_phases_leave_the_plugin_alone(fast_prepare, tmp_path):
    gates = FakeGates()
    script = {"model": [[write(f"{PLUGIN}/modeling_fakevl.py", "X = 1\n")]],
              "data": [[write("mindspeed_mm/fsdp/data/datasets/fakevl/__init__.py", "Y = 1\n")]]}
    final, records = drive(fast_prepare, tmp_path, script, gates)
    assert final["exit_status"] == "success" and gates.calls == ["G1", "G2", "G3", "G4", "G5", "G6"]
    assert not [r for r in records if r["kind"] == "gate_rerun"]


def test_a_failing_rerun_sends_the_run_back_to_the_model_phase(fast_prepare, tmp_path):
    gates = FakeGates({"G1": [None, "RuntimeError: forward loss is nan"]})
    script = {"model": [[write(f"{PLUGIN}/modeling_fakevl.py", "X = 1\n")]],
              "data": [[write(f"{PLUGIN}/modeling_fakevl.py", "X = 2\n")]]}
    final, records = drive(fast_prepare, tmp_path, script, gates)
    assert gates.calls[:3] == ["G1", "G1", "G1"]  # the re-run failed: G2 never ran on it; model repaired, G1 again
    assert "G2" not in gates.calls[:3]
    assert [r["phase"] for r in records if r["kind"] == "gate" and r["gate"] == "G1"][:3] == ["model", "data", "model"]


MODEL_FAILURE = "load run: uninitialised storage at the first forward: non-persistent buffer `model.rotary.inv_freq`"


def test_a_model_repair_re_proves_later_phases_without_asking_the_policy(fast_prepare, tmp_path):
    """G5 fails on the model: after the model phase's repair passes G1, data and config (their files untouched)
    run their gates directly — no policy decision, no LLM request that could only say "unchanged"."""
    gates = FakeGates({"G5": [MODEL_FAILURE]})
    script = {"model": [[write(f"{PLUGIN}/modeling_fakevl.py", "X = 1\n")]],
              "data": [[write("mindspeed_mm/fsdp/data/datasets/fakevl/__init__.py", "Y = 1\n")]],
              "config": [[write("examples/fakevl/fakevl_config.yaml", "a: 1\n")]]}
    policy = ScriptedPolicy(script)
    run = make_run(fast_prepare, tmp_path, policy, gates, tools=lambda ctx: [echo_tool(), *file_writer_tools(ctx)])
    try:
        final = run.drive()
    finally:
        run.close()
    records = [json.loads(line) for line in (run.ctx.run_dir / "trajectory.jsonl").read_text().splitlines()]
    assert final["exit_status"] == "success", final.get("exit_detail")
    assert gates.calls == ["G1", "G2", "G3", "G4", "G5", "G1", "G2", "G3", "G4", "G5", "G6"]
    direct = [r for r in records if r["kind"] == "gate_direct"]
    assert [(r["phase"], r["files_unchanged"]) for r in direct] == [
        ("data", ["mindspeed_mm/fsdp/data/datasets/fakevl/__init__.py"]),
        ("config", ["examples/fakevl/fakevl_config.yaml"])]
    decided = [r["phase"] for r in records if r["kind"] == "decision"]
    assert decided.count("data") == decided.count("config") == 2  # first visit only (a call, then "done")
    assert decided.count("model") == 4  # the first visit and the repair
    handoff = {h["phase"]: h for h in final["handoff"]}
    assert handoff["data"]["files_written"] == ["mindspeed_mm/fsdp/data/datasets/fakevl/__init__.py"]


def test_a_phase_whose_files_changed_is_asked_again(fast_prepare, tmp_path):
    gates = FakeGates({"G5": [MODEL_FAILURE]})
    script = {"model": [[write(f"{PLUGIN}/modeling_fakevl.py", "X = 1\n")],
                        [write("mindspeed_mm/fsdp/data/datasets/fakevl/__init__.py", "Y = 2\n")]],
              "data": [[write("mindspeed_mm/fsdp/data/datasets/fakevl/__init__.py", "Y = 1\n")]]}
    final, records = drive(fast_prepare, tmp_path, script, gates)
    assert final["exit_status"] == "success", final.get("exit_detail")
    assert "data" not in [r["phase"] for r in records if r["kind"] == "gate_direct"]


def test_a_file_a_later_phase_finished_is_no_work_left_to_the_phase_that_drafted_it(fast_prepare, tmp_path):
    """The data phase drafts the YAML, the config phase edits it and G3 passes on the edit; after a model repair the
    data phase's files differ from G2's pass only by that proved edit: both phases run their gates directly."""
    gates = FakeGates({"G5": [MODEL_FAILURE]})
    yaml = "examples/fakevl/fakevl_config.yaml"
    script = {"model": [[write(f"{PLUGIN}/modeling_fakevl.py", "X = 1\n")]],
              "data": [[write("mindspeed_mm/fsdp/data/datasets/fakevl/__init__.py", "Y = 1\n"), write(yaml, "d: 1\n")]],
              "config": [[write(yaml, "d: 1\nc: 1\n")]]}
    final, records = drive(fast_prepare, tmp_path, script, gates)
    assert final["exit_status"] == "success", final.get("exit_detail")
    assert gates.calls == ["G1", "G2", "G3", "G4", "G5", "G1", "G2", "G3", "G4", "G5", "G6"]
    assert [r["phase"] for r in records if r["kind"] == "gate_direct"] == ["data", "config"]
    decided = [r["phase"] for r in records if r["kind"] == "decision"]
    assert decided.count("data") == decided.count("config") == 2  # first visit only


def test_a_later_phases_pass_before_the_repair_does_not_hide_the_repairs_edit(fast_prepare, tmp_path):
    """The model repair edits the YAML the data phase drafted: changed after G3's pass too, so data is asked."""
    gates = FakeGates({"G5": [MODEL_FAILURE]})
    yaml = "examples/fakevl/fakevl_config.yaml"
    script = {"model": [[write(f"{PLUGIN}/modeling_fakevl.py", "X = 1\n")], [write(yaml, "d: 2\n")]],
              "data": [[write(yaml, "d: 1\n")]], "config": [[write(yaml, "d: 1\nc: 1\n")]]}
    final, records = drive(fast_prepare, tmp_path, script, gates)
    assert final["exit_status"] == "success", final.get("exit_detail")
    assert "data" not in [r["phase"] for r in records if r["kind"] == "gate_direct"]
