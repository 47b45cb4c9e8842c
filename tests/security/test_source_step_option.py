"""``--source-step FILE.py:function`` (spec key ``source_step``): the user's own training step, checked before a
run starts — a missing file, a missing function or a wrong signature is one line, exit 2, and nothing is left in
the target or the runs folder — then recorded by the plan (copied into the run folder) and handed to G4's training
parity probe as its source side. The user's code is read with ``ast`` here, never run in msmigrate's process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from attack_kit import make_checkout

from msmigrate.tools.source_step import copy_step, describe, resolve_ref, step_form, step_problem

GOOD = '''import torch.nn.functional as F


def loss_step(model, batch):
    return model(batch["input_ids"])["logits"].sum()


def loop_step(model, micro_batches, settings, extra=None):
    return []


async def async_step(model, batch):
    return 0


def one_arg(model):
    return 0


def too_many(model, batch, settings, optimizer):
    return 0


def star_args(model, *batches):
    return 0


def kw_required(model, batch, *, scale):
    return 0


class StepClass:
    pass


assigned_step = loss_step
'''


@pytest.fixture()
def steps(tmp_path):
    path = tmp_path / "my_step.py"
    path.write_text(GOOD)
    return path


def test_the_two_forms_are_told_apart_by_their_required_parameters(steps):
    assert step_form(f"{steps}:loss_step") == ("loss", None)
    assert step_form(f"{steps}:loop_step") == ("loop", None)  # a defaulted 4th parameter is not required


@pytest.mark.parametrize("ref, words", [
    ("{dir}/nope.py:loss_step", ["no such file", "nope.py"]),
    ("{dir}/my_step.txt:loss_step", ["not a Python file"]),
    ("{dir}/my_step.py", ["give FILE.py:function"]),
    ("{dir}/my_step.py:missing", ["defines no function 'missing'", "loss_step"]),
    ("{dir}/my_step.py:async_step", ["is async"]),
    ("{dir}/my_step.py:StepClass", ["not defined with def"]),
    ("{dir}/my_step.py:assigned_step", ["not defined with def"]),
    ("{dir}/my_step.py:one_arg", ["wrong signature", "function(model, batch) -> loss"]),
    ("{dir}/my_step.py:too_many", ["wrong signature"]),
    ("{dir}/my_step.py:star_args", ["wrong signature"]),
    ("{dir}/my_step.py:kw_required", ["wrong signature"]),
    ("{dir}/broken.py:loss_step", ["line 1 does not parse"]),
])
def test_a_step_that_cannot_be_used_is_one_line_naming_why(steps, ref, words):
    (steps.parent / "my_step.txt").write_text(GOOD)
    (steps.parent / "broken.py").write_text("def loss_step(model, batch:\n")
    problem = step_problem(ref.format(dir=steps.parent))
    assert problem and "\n" not in problem and all(w in problem for w in words), problem


def test_no_step_given_is_no_problem():
    assert step_problem(None) is None and step_problem("") is None


def test_the_file_is_relative_to_the_spec_and_the_copy_is_what_runs(steps, tmp_path):
    from msmigrate.agent.config import RunSpec

    spec = RunSpec.from_dict({"source": "src", "target": "mm", "model_name": "tiny",
                              "source_step": "my_step.py:loss_step"}, steps.parent)
    assert spec.source_step == f"{steps.resolve()}:loss_step"
    assert resolve_ref("/abs/x.py:f", tmp_path) == "/abs/x.py:f"
    record = copy_step(spec.source_step, tmp_path / "run")
    assert Path(record["copy"]).read_text() == GOOD and record["probe_ref"] == f"{record['copy']}:loss_step"
    assert record["form"] == "loss" and record["problem"] is None and len(record["sha256"]) == 64
    steps.write_text(GOOD + "\n# edited after the run started\n")
    again = copy_step(spec.source_step, tmp_path / "run")  # a resumed run keeps the step it started with
    assert again["sha256"] == record["sha256"]
    assert describe(record) == f"the user's step {steps.resolve()}:loss_step (loss form)"


def test_an_eval_task_resolves_its_step_against_the_suite(tmp_path):
    from msmigrate.faces.eval.suite import task_from_dict

    task = task_from_dict({"fixture": "patchlm", "spec": {"source_step": "steps/s.py:loss_step"}}, tmp_path)
    assert task.spec["source_step"] == f"{(tmp_path / 'steps/s.py').resolve()}:loss_step"


@pytest.fixture()
def inputs(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "config.json").write_text("{}")
    return source, make_checkout(tmp_path / "mm")


def _cli(tmp_path: Path, command: str, *extra: str):
    spec = tmp_path / "spec.yaml"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "msmigrate.faces.cli", command, str(spec), "--runs-dir",
                           str(tmp_path / "runs"), *extra], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("command, spec_key, flag, words", [
    ("run", "", ["--source-step", "steps.py:nope"], ["defines no function 'nope'", "loss_step"]),
    ("run", "source_step: missing.py:loss_step\n", [], ["no such file", "missing.py"]),
    ("verify", "", ["--source-step", "steps.py:one_arg"], ["wrong signature"]),
])
def test_the_cli_refuses_a_bad_step_before_the_run_exists(tmp_path, inputs, command, spec_key, flag, words):
    source, checkout = inputs
    (tmp_path / "steps.py").write_text(GOOD)
    (tmp_path / "spec.yaml").write_text(f"source: {source}\ntarget: {checkout}\nmodel_name: tiny\n{spec_key}")
    heads = subprocess.run(["git", "-C", str(checkout), "for-each-ref"], capture_output=True, text=True).stdout
    out = _cli(tmp_path, command, *flag)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and all(w in lines[0] for w in words), out.stderr
    assert subprocess.run(["git", "-C", str(checkout), "for-each-ref"], capture_output=True,
                          text=True).stdout == heads
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_resumed_run_takes_no_new_step(tmp_path):
    out = subprocess.run([sys.executable, "-m", "msmigrate.faces.cli", "run", "--resume", "r1", "--runs-dir",
                          str(tmp_path / "runs"), "--source-step", "x.py:f"], capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "keeps the step it started with" in out.stderr, out.stderr


def test_the_default_suite_gives_patchlm_its_users_step():
    """patchlm (logits only, no training code) is the one fixture whose eval task names a source step: its file
    resolves from the suite and passes the same check a run makes."""
    from msmigrate.faces.eval.suite import load_suite

    steps = {t.fixture: t.spec.get("source_step") for t in load_suite("default").tasks if t.spec.get("source_step")}
    assert list(steps) == ["patchlm"]
    assert steps["patchlm"].endswith("testbeds/fixtures/source_steps/patchlm_step.py:training_step")
    assert step_problem(steps["patchlm"]) is None and step_form(steps["patchlm"])[0] == "loss"
