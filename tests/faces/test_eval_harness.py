"""The eval harness: scorers on hand-made run folders, pass@k, suites and task folders, the runner and the
leaderboard with fake runs, and (one) real ``msmigrate eval`` through the scripted policy and the real validator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from run_dirs import make_run, make_target

from msmigrate.testbeds.fixtures import FIXTURES
from msmigrate.faces.eval.leaderboard import build_entry, leaderboard_markdown, pass_at_k, update_leaderboard
from msmigrate.faces.eval.runner import EvalConfig, run_suite
from msmigrate.faces.eval.scorers import Validation, score_run_dir
from msmigrate.faces.eval.suite import load_suite

EXPECT = {"model_id": "mm", "dataset_type": "huggingface", "template": "tmpl", "data_branch": "A"}


def clean(text, target, python) -> Validation:
    return Validation(True, [])


def weakened(text, target, python) -> Validation:
    return Validation(False, [{"severity": "error", "code": "weakened-train-iters", "path": "training.train_iters"}],
                      "config invalid")


def failed_checks(score) -> set[str]:
    return {c.name for c in score.checks if not c.passed}


def test_scorers_on_hand_made_runs(tmp_path):
    target = make_target(tmp_path / "t")
    runs = tmp_path / "runs"
    good = score_run_dir(make_run(runs, "good", target), EXPECT, validate=clean)
    assert good.passed, good.checks
    assert good.soft == {"launches": 3.0, "policy_steps": 6.0, "tool_calls": 4.0, "tokens": 0.0, "format_errors": 0.0,
                         "wall_s": 12.5}
    assert good.first_failing_gate is None

    outside = score_run_dir(make_run(runs, "outside", target, outside_edit=True), EXPECT, validate=clean)
    assert failed_checks(outside) == {"edits_in_scope"}
    assert "mindspeed_mm/fsdp/train/trainer.py" in next(c.detail for c in outside.checks if c.name == "edits_in_scope")

    no_evidence = score_run_dir(make_run(runs, "noev", target, drop_evidence_of="G5"), EXPECT, validate=clean)
    assert failed_checks(no_evidence) == {"gates_green"}

    # parity: a failed model parity or an unmeasured data parity fails the hard check; sharded may say why not
    bad = score_run_dir(make_run(runs, "parity_bad", target, parity={
        "model": {"status": "fail", "problems": ["eager: max |Δlogit| 0.5"]}, "data": None}), EXPECT, validate=clean)
    assert failed_checks(bad) == {"parity"}
    detail = next(c.detail for c in bad.checks if c.name == "parity")
    assert "G1 model parity fail: eager" in detail and "G2 data parity not measured" in detail
    nc = score_run_dir(make_run(runs, "parity_nc", target, parity={
        "sharded": {"status": "not_comparable", "why_not": "dropout on"}}), EXPECT, validate=clean)
    assert nc.passed and "not comparable: dropout on" in next(c.detail for c in nc.checks if c.name == "parity")
    silent = score_run_dir(make_run(runs, "parity_silent", target, parity={
        "sharded": {"status": "not_comparable"}}), EXPECT, validate=clean)
    assert failed_checks(silent) == {"parity"}  # "cannot compare" without a reason is not a pass

    g4 = score_run_dir(make_run(runs, "g4", target, failing_gate="G4"), EXPECT, validate=clean)
    assert "gates_green" in failed_checks(g4) and g4.first_failing_gate == "G4"

    wrong = score_run_dir(make_run(runs, "wrong", target, template="other",
                                   plan={"model_id": "mm", "data_branch": "B", "template": "tmpl"}), EXPECT, validate=clean)
    # the delivered config wins over the plan for template; the branch comes from the plan
    assert failed_checks(wrong) == {"expected_template", "expected_data_branch"}

    weak = score_run_dir(make_run(runs, "weak", target), EXPECT, validate=weakened)
    assert failed_checks(weak) == {"validator_clean", "not_weakened"}

    no_edits = make_run(runs, "noedits", target)
    subprocess.run(["git", "-C", str(target), "branch", "-D", "msmigrate/noedits"], check=True, capture_output=True)
    nothing_written = score_run_dir(no_edits, EXPECT, validate=clean)
    assert "edits_in_scope" not in failed_checks(nothing_written)  # no edits: nothing outside the editable paths
    assert "validator_clean" in failed_checks(nothing_written)  # … but no delivered config either

    missing = score_run_dir(runs / "nothing", EXPECT, validate=clean)
    assert not missing.passed and missing.error


def test_pass_at_k():
    assert pass_at_k(5, 0, 1) == 0.0
    assert pass_at_k(5, 5, 3) == 1.0
    assert pass_at_k(5, 1, 1) == pytest.approx(0.2)
    assert pass_at_k(5, 1, 5) == 1.0
    assert pass_at_k(3, 1, 2) == pytest.approx(1 - 1 / 3)


def test_default_suite_covers_every_fixture_and_task_dirs_add_tasks(tmp_path):
    suite = load_suite("default")
    assert suite.error is None
    assert sorted(t.fixture for t in suite.tasks) == sorted(FIXTURES)
    llava = next(t for t in suite.tasks if t.id == "llava")
    assert llava.expect == {"model_id": "llava", "dataset_type": "huggingface", "template": "llava", "data_branch": "B"}
    extra = tmp_path / "private"
    extra.mkdir()
    (extra / "held_out.yaml").write_text("- id: secret_vlm\n  source: ../src\n  model_name: secret_vlm\n  expect: "
                                         "{model_id: secret_vlm, dataset_type: huggingface, template: s, data_branch: B}\n")
    with_extra = load_suite("default", extra)
    assert len(with_extra.tasks) == len(FIXTURES) + 1
    secret = with_extra.tasks[-1]
    assert secret.source == (tmp_path / "src").resolve() and secret.fixture is None
    (extra / "dupe.yaml").write_text("fixture: llava\n")
    assert "duplicate" in load_suite("default", extra).error
    (extra / "dupe.yaml").write_text("- source: x\n  id: y\n")
    assert "expect lacks" in load_suite("default", extra).error
    assert "no suite" in load_suite("nonexistent").error


def test_runner_and_leaderboard_with_fake_runs(tmp_path):
    base = make_target(tmp_path / "base")
    suite_file = tmp_path / "suite.yaml"
    suite_file.write_text(f"name: mini\ntrials: 2\ntasks:\n  - id: m\n    source: src\n    model_name: mm\n"
                          f"    target: {base}\n    expect: {json.dumps(EXPECT)}\n")
    suite = load_suite(suite_file)
    assert suite.error is None
    calls = []

    def fake_run(spec, run_id, settings):  # trial 0 passes, trial 1 fails G4
        calls.append((spec.policy, spec.target))
        make_run(settings.runs_dir, run_id, spec.target, failing_gate="G4" if len(calls) == 2 else None)
        return {}

    cfg = EvalConfig(policy="rules", workdir=tmp_path / "w")
    scores = run_suite(suite, cfg, run_fn=fake_run, validate=clean)
    assert [s.passed for s in scores] == [True, False]
    assert len({t for _, t in calls}) == 2  # a fresh clone of the target per trial
    again = run_suite(suite, cfg, run_fn=lambda *a: pytest.fail("scored trials must not run again"), validate=clean)
    assert [s.passed for s in again] == [True, False]

    entry = build_entry("rules", "mini", "rules", scores, 2)
    assert entry["tasks"]["m"]["pass@1"] == 0.5 and entry["tasks"]["m"]["pass@2"] == 1.0
    assert entry["tasks"]["m"]["first_failing_gate"] == "G4"
    assert entry["tasks"]["m"]["soft"]["launches"]["mean"] == 3.0
    board = tmp_path / "lb.json"
    update_leaderboard(board, build_entry("worse", "mini", "llm", scores[1:], 1))
    entries = update_leaderboard(board, entry)
    assert [e["label"] for e in entries] == ["rules", "worse"]
    md = leaderboard_markdown(entries)
    assert "| 1 | rules | mini | 1 | 0.50 | 1.00 (2) | 1/1 |" in md


def test_eval_cli_scripted_policy_real_validator(tmp_path, source_model, hook_env):
    """The real command on one task: a clean migration passes; the same migration with a weakened config (which
    the fake G3 lets through) is caught by the harness's own validator check."""
    fx = FIXTURES["qwen2_vl"]
    suite = tmp_path / "one.yaml"
    suite.write_text(f"name: one\ntasks:\n  - fixture: qwen2_vl\n    source: {source_model}\n")
    base = [sys.executable, "-m", "msmigrate.faces.cli", "eval", str(suite), "--policy", "rules",
            "--workdir", str(tmp_path / "w"), "--leaderboard", str(tmp_path / "lb.json")]
    ok = subprocess.run(base, env=hook_env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # progress: each trial as it starts and ends, and where the leaderboard went
    lines = ok.stderr.splitlines()
    assert any(ln.strip().startswith("[1/1] qwen2_vl trial 0: started, run qwen2_vl-t0-") for ln in lines), ok.stderr
    assert any(ln.strip().startswith("[1/1] qwen2_vl trial 0: PASS success") for ln in lines), ok.stderr
    # between the two: the run's phases and gates as they happened (at the latest, before the verdict line)
    verdict = next(i for i, ln in enumerate(lines) if "trial 0: PASS success" in ln)
    before = [ln.strip() for ln in lines[:verdict]]
    assert "qwen2_vl trial 0: gate G6 PASS" in before and "qwen2_vl trial 0: gate G4 running" in before, ok.stderr
    assert f"leaderboard: {tmp_path / 'lb.json'} and {tmp_path / 'lb.md'}" in ok.stderr
    assert "| 1 | rules | one | 1 | 1.00 | 1.00 (1) | 1/1 |" in ok.stdout
    assert f"| {fx.name} | 1/1 |" in ok.stdout
    weak = subprocess.run([*base, "--label", "weakened", "--redo"], env={**hook_env, "FAKE_WEAKEN": "1"},
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert weak.returncode == 1
    assert "| 2 | weakened | one | 1 | 0.00 | 0.00 (1) | 0/1 |" in weak.stdout
    entry = json.loads((tmp_path / "w" / "one-rules" / "entry.json").read_text())
    rates = entry["tasks"]["qwen2_vl"]["check_pass_rate"]
    assert rates["not_weakened"] == 0.0 and rates["gates_green"] == 1.0 and rates["expected_template"] == 1.0


def test_parity_check_reads_g2s_model_parity_when_g1s_was_not_comparable(tmp_path):
    """A bare-tokenizer source whose forward requires images: G1's model parity is not comparable, G2 runs it on its
    collated batch; the hard check reads that record (and still fails without one, or on its failure)."""
    import json

    target = make_target(tmp_path / "t")
    runs = tmp_path / "runs"
    not_fed = {"status": "not_comparable", "unfed": ["pixel_values"], "why_not": "requires ['pixel_values']"}

    def score(name, g2_model):
        run = make_run(runs, name, target, parity={"model": not_fed})
        evidence = json.loads((run / "evidence.json").read_text())
        if g2_model is not None:
            evidence["gates"]["G2"]["parity"]["model"] = g2_model
        (run / "evidence.json").write_text(json.dumps(evidence))
        return score_run_dir(run, EXPECT, validate=clean)

    assert failed_checks(score("nc_alone", None)) == {"parity"}
    assert score("nc_then_g2", {"status": "pass", "problems": []}).passed
    bad = score("nc_then_g2_fail", {"status": "fail", "problems": ["meta init + load: max |Δlogit| inf"]})
    assert failed_checks(bad) == {"parity"}
    assert "meta init + load" in next(c.detail for c in bad.checks if c.name == "parity")


def test_a_bare_tokenizer_source_accepts_a_dataset_plugin_as_well_as_b():
    """internvl_chat's AutoProcessor is a bare tokenizer: the plan recommends C (a dataset plugin of its own) and blind
    live players delivered C, so the fixture's expectation must not fail that delivery; A, or C under another name,
    still fails."""
    from msmigrate.faces.eval.scorers import check_facts

    task = next(t for t in load_suite("default").tasks if t.fixture == "internvl_chat")
    assert task.expect["data_branch"] == "B|C" and task.expect["dataset_type"] == "huggingface|internvl_chat"
    facts = {k: task.expect[k] for k in ("data_branch", "dataset_type")}

    def failing(branch, dataset_type):
        config = {"data": {"dataset_param": {"dataset_type": dataset_type}}}
        return {c.name for c in check_facts(facts, {"data_branch": branch}, config) if not c.passed}

    assert failing("C", "internvl_chat") == set()
    assert failing("B", "huggingface") == set()
    assert failing("A", "huggingface") == {"expected_data_branch"}
    assert failing("C", "other_name") == {"expected_dataset_type"}
    llava = next(t for t in load_suite("default").tasks if t.fixture == "llava")
    assert llava.expect["data_branch"] == "B"  # a source with a real processor: B only


def test_a_run_declined_at_the_plan_has_no_failing_gate_and_shows_its_exit(tmp_path):
    """Expected to succeed, the run declined at the plan (only G0 ran): no gate failed, so none is named; the
    leaderboard's exit-status column says what happened instead."""
    from msmigrate.faces.eval.leaderboard import tasks_markdown

    target = make_target(tmp_path / "t")
    run_dir = make_run(tmp_path / "runs", "declined", target)
    evidence = json.loads((run_dir / "evidence.json").read_text())
    evidence.update(exit_status="unsupported_by_policy", exit_detail="rules cannot write remote code",
                    gates={"G0": evidence["gates"]["G0"]})
    (run_dir / "evidence.json").write_text(json.dumps(evidence))
    score = score_run_dir(run_dir, EXPECT, validate=clean, task_id="m")
    assert not score.passed and score.first_failing_gate is None
    g4 = score_run_dir(make_run(tmp_path / "runs", "g4", target, failing_gate="G4"), EXPECT, validate=clean,
                       task_id="m", trial=1)
    entry = build_entry("rules", "mini", "rules", [score, g4], 2)
    assert entry["tasks"]["m"]["exit_status_counts"] == {str(g4.exit_status): 1, "unsupported_by_policy": 1}
    row = next(ln for ln in tasks_markdown(entry).splitlines() if ln.startswith("| m |"))
    assert "unsupported_by_policy ×1" in row and "| G4 |" in row  # the one gate that ran and failed
    solo = tasks_markdown(build_entry("rules", "mini", "rules", [score], 1))
    row = next(ln for ln in solo.splitlines() if ln.startswith("| m |"))
    assert "| unsupported_by_policy ×1 | — |" in row  # not "G1": no gate after G0 ran
    board = leaderboard_markdown([entry])
    assert "| exit statuses |" in board.splitlines()[0] and "unsupported_by_policy ×1" in board


def test_trial_progress_shows_phase_and_gates_as_they_happen(tmp_path):
    from msmigrate.faces.eval.progress import TrialWatch

    traj = tmp_path / "run" / "trajectory.jsonl"
    traj.parent.mkdir()
    said: list[str] = []
    watch = TrialWatch(said.append, poll_s=3600)  # polled by hand below: no timing in the test
    watch.label, watch.trajectory = "m trial 0", traj
    assert watch.poll() == []  # nothing written yet
    traj.write_text(json.dumps({"kind": "drive", "phase": "prepare"}) + "\n")
    assert watch.poll() == ["m trial 0: phase prepare"]
    with open(traj, "a") as fh:
        fh.write(json.dumps({"kind": "gate", "gate": "G0", "passed": True, "phase": "prepare"}) + "\n")
        fh.write(json.dumps({"kind": "decision", "phase": "model"}) + "\n")
        fh.write(json.dumps({"kind": "gate", "gate": "G1", "passed": False, "phase": "model"}) + "\n")
    assert watch.poll() == ["m trial 0: phase model", "m trial 0: gate G0 PASS", "m trial 0: gate G1 FAIL"]
    assert watch.poll() == []  # each change once
    watch.start("m trial 1", tmp_path / "run")  # a real watch: stop() reports what the last poll has not
    watch.event("gate_start", {"gate": "G4", "phase": "verify"})  # a gate in flight is named when it starts
    watch.stop()
    assert said[-4:] == ["m trial 1: gate G4 running", "m trial 1: phase model", "m trial 1: gate G0 PASS",
                         "m trial 1: gate G1 FAIL"]
