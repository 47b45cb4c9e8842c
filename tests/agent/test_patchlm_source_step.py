"""patchlm (custom code whose forward returns logits only, no training code) with its user's training step: the
project's scripted play (``patchlm_script.py``, as the LLM policy's HTTP test) migrates it into a fresh stand-in with
``source_step`` = the fixture's step (``msmigrate/testbeds/fixtures/source_steps/patchlm_step.py``). G4's training
parity is then compared — 20 steps, per-step loss and grad norm, step-1 gradients per group, the fixed-batch fall
both sides — and equal; the report names the user's step. Deliberately wrong steps (``patchlm_wrong_steps.py``: the
loss ×2, labels not shifted) run through the same check on the migrated target fail it, naming the cause."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from live_recording import replay  # noqa: E402
from patchlm_script import build_script  # noqa: E402

from msmigrate.agent.config import LaunchSettings  # noqa: E402
from msmigrate.agent.routes.fsdp2.gates.parity import training_parity_check  # noqa: E402
from msmigrate.core.run_context import RunContext  # noqa: E402
from msmigrate.tools.source_step import copy_step  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
USER_STEP = REPO / "msmigrate" / "testbeds" / "fixtures" / "source_steps" / "patchlm_step.py"
WRONG = Path(__file__).resolve().parent / "patchlm_wrong_steps.py"


@pytest.fixture(scope="module")
def patchlm_run(tmp_path_factory):
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.standin import write_standin

    work = tmp_path_factory.mktemp("patchlm_step")
    source = build_source("patchlm", work / "source")
    target = write_standin(work / "target")
    script = build_script(source, target, source / "data" / "train.json")
    return replay({"fixture": "patchlm", "script": script, "classify": []}, work, "patchlm-step", source=source,
                  target=target, spec_extra={"source_step": f"{USER_STEP}:training_step"})


@pytest.mark.integration
def test_patchlm_with_its_users_step_trains_like_that_step(patchlm_run):
    final, run_dir = patchlm_run["final"], patchlm_run["run_dir"]
    assert final["exit_status"] == "success", final.get("exit_detail")
    record = final["gates"]["G4"]["parity"]["training"]
    assert record["status"] == "pass" and not record["problems"], record
    assert record["source_step"].startswith(f"the user's step {USER_STEP}:training_step: its loss on each micro")
    assert record["steps"] == 20 == len(record["source"]["loss"]) == len(record["target"]["loss"])
    assert record["max_dloss"] <= 1e-4 and record["max_rel_dgrad_norm"] <= 1e-3
    assert record["grad_groups"] and all(g["ok"] and g["no_grad"] == 0 for g in record["grad_groups"])
    fixed = record["fixed_batch"]
    assert fixed["fall"] >= 0.005 and fixed["source_fall"] == pytest.approx(fixed["fall"], abs=1e-4)
    # the 2-rank parity of G6 compares with the same step
    g6 = final["gates"]["G6"]["parity"]["training"]
    assert g6["status"] == "pass" and g6["source_step"] == record["source_step"]
    evidence = json.loads((run_dir / "evidence.json").read_text())
    step = evidence["plan"]["source_step"]
    assert step["copy"] == str(run_dir / "source_step" / "patchlm_step.py") and step["form"] == "loss"
    report = (run_dir / "verification_report.md").read_text()
    assert f"Source step: the user's step {USER_STEP}:training_step" in report
    assert (run_dir / "training_parity.png").stat().st_size > 0


def _migrated_copy(patchlm_run, name):
    """The migrated stand-in at the run's branch, and gate deps pointing at it (a short K: the fault shows at step
    1)."""
    target = patchlm_run["target"]
    dest = patchlm_run["run_dir"].parent.parent / f"wrong_{name}"
    shutil.copytree(target, dest, symlinks=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", "-f", f"msmigrate/{patchlm_run['run_id']}"], check=True)
    source = patchlm_run["run_dir"].parent.parent / "source"  # where the fixture wrote it
    ctx = RunContext(run_id=f"wrong-{name}", run_dir=dest.parent / f"run_{name}", source=source, target=dest,
                     model_name="patchlm", data_path=source / "data" / "train.json")
    return SimpleNamespace(ctx=ctx, spec=SimpleNamespace(launch=LaunchSettings(parity_steps=3)))


@pytest.mark.integration
@pytest.mark.parametrize("func, words", [
    ("loss_doubled", ["the migrated loss is 0.5× the source's", "every group's gradient is 0.5× the source's"]),
    ("labels_unshifted", ["labels are shifted once more in the migrated model than in the user's step"]),
])
def test_a_wrong_step_fails_the_parity_naming_the_cause(patchlm_run, func, words):
    deps = _migrated_copy(patchlm_run, func)
    plan = {**patchlm_run["final"]["plan"], "source_step": copy_step(f"{WRONG}:{func}", deps.ctx.run_dir)}
    _, problems, record = training_parity_check(deps, {"plan": plan, "gates": {}})
    assert record["status"] == "fail", record
    text = " | ".join(problems)
    assert all(w in text for w in words), text
    assert f"the user's step {WRONG}:{func}" in text  # the reference named: the user's own file, not the copy
