"""The Megatron-route scorers fail the dishonest outcomes: success without training evidence, a needs_accelerator
exit with no gate saying so, delivered files that disagree with the spec's sizes."""

from __future__ import annotations

import json

from msmigrate.faces.eval.megatron_scorers import check_delivered, check_honest_exit, check_static_gates

EV = {"command": "x", "exit_code": 0, "started": 1.0, "ended": 2.0}
STATIC = {g: {"passed": True, "evidence": [EV]} for g in ("G0", "G1", "G2", "G3")}


def test_success_needs_training_evidence():
    assert not check_honest_exit({"exit_status": "success", "gates": STATIC}).passed
    trained = {**STATIC, **{g: {"passed": True, "evidence": [EV]} for g in ("G4", "G5", "G6")}}
    assert check_honest_exit({"exit_status": "success", "gates": trained}).passed


def test_needs_accelerator_must_be_said_by_a_gate():
    quiet = {"exit_status": "needs_accelerator", "exit_detail": "G4 …", "gates": {**STATIC, "G4": {"passed": False}}}
    assert not check_honest_exit(quiet).passed
    said = {**quiet, "gates": {**STATIC, "G4": {"passed": False, "needs_accelerator": "no NPU"}}}
    assert check_honest_exit(said).passed
    assert not check_honest_exit({"exit_status": "gates_failed", "gates": STATIC}).passed


def test_static_gates_need_evidence():
    assert check_static_gates({"gates": STATIC}).passed
    assert not check_static_gates({"gates": {**STATIC, "G2": {"passed": True, "evidence": []}}}).passed


PLAN = {"parallel": {"tp": 2, "pp": 2, "cp": 1, "vpp": 1}, "model_json_path": "m.json", "data_json_path": "d.json",
        "script_path": "s.sh"}


def files(stages, tp=2):
    model = json.dumps({"text_decoder": {"num_layers": 4, "pipeline_num_layers": stages}})
    return {"m.json": model, "d.json": "{}", "s.sh": f"TP={tp}\nPP=2\nCP=1\n"}.get


def test_delivered_files_agree_with_the_sizes():
    assert check_delivered(PLAN, files([2, 2])).passed
    assert not check_delivered(PLAN, files([4])).passed  # one stage for pp 2
    assert not check_delivered(PLAN, files([2, 1])).passed  # stages do not sum to the layers
    bad = check_delivered(PLAN, files([2, 2], tp=1))
    assert not bad.passed and "script TP=1, spec 2" in bad.detail


def test_megatron_suite_loads_with_route_expectations(tmp_path):
    from msmigrate.faces.eval.runner import _target
    from msmigrate.faces.eval.suite import load_suite

    suite = load_suite("megatron")
    assert suite.error is None and len(suite.tasks) >= 4
    assert {t.target for t in suite.tasks} == {"megatron_standin"}
    assert {t.expect["exit_status"] for t in suite.tasks} == {"needs_accelerator", "unsupported_by_policy"}
    target = _target(suite.tasks[0], tmp_path, 0)  # a fresh Megatron stand-in, committed
    assert (target / "pretrain_vlm.py").is_file() and (target / ".git").is_dir()


def test_new_component_check_wants_the_files_and_additions_only():
    from msmigrate.faces.eval.megatron_scorers import check_new_component

    plan = {"new_component": {"model_id": "x_vit", "class_name": "XViT", "module_path": "m/x.py",
                              "edits": {"m/reg.py": ""}}, "editable_extra": ["m/x.py", "m/reg.py"]}
    base = {"m/reg.py": "T = {'a': A,\n     'b': B}\n"}.get
    good = {"m/x.py": "class XViT:\n    pass\n", "m/reg.py": "T = {'a': A,\n     'b': B,\n     'x_vit': XViT,}\n"}
    assert check_new_component({}, plan, good.get, base) is None
    assert check_new_component({"new_component": "x_vit"}, plan, good.get, base).passed
    dropped = {**good, "m/reg.py": "T = {'x_vit': XViT}\n"}  # registered, but the framework's entries are gone
    assert not check_new_component({"new_component": "x_vit"}, plan, dropped.get, base).passed
    wider = {**plan, "editable_extra": ["m/x.py", "m/reg.py", "m/"]}
    assert not check_new_component({"new_component": "x_vit"}, wider, good.get, base).passed
    assert not check_new_component({"new_component": "y_vit"}, plan, good.get, base).passed
