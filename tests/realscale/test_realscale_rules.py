"""The rules policy on real-scale sources (the published configuration, 2 layers per tower, a multi-shard
checkpoint, images the published processor expands into hundreds of tokens), on the stand-in target and on the real
MindSpeed-MM. The similar example's cutoff_len is shorter than one such sample where the expansion is large, as real
users meet it: G2 must then stop the run with the numbers (kept vs full media tokens, the length needed) before any
training launch. The source is written by the real runtime's transformers (4.57) where $MSMIGRATE_REAL_RUNTIME names
one (so the same folder serves both targets), else by this venv's."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import pytest
import yaml

from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.runner import Run, new_run_id
from msmigrate.testbeds.fixtures.realscale import REALSCALE

pytestmark = [pytest.mark.realscale, pytest.mark.integration]

REALMM = Path(__file__).resolve().parents[1] / "realmm"


def _runtime_python() -> str | None:
    venv = os.environ.get("MSMIGRATE_REAL_RUNTIME")
    python = Path(venv) / "bin" / "python" if venv else None
    return str(python) if python and python.is_file() else None


def _source(family: str, dest: Path) -> Path:
    from msmigrate.testbeds.fixtures.in_runtime import build_source_in_runtime
    from msmigrate.testbeds.fixtures.realscale import build_realscale_source

    python = _runtime_python()
    source = (build_source_in_runtime(family, dest, python, timeout=1800.0, realscale=True) if python
              else build_realscale_source(family, dest))
    assert len(list(source.glob("model-*-of-*.safetensors"))) > 1 and (source / "model.safetensors.index.json").is_file()
    return source


def _check_end(evidence: dict, state: dict) -> None:
    """Either G2 stopped the run on the cutoff with the numbers and nothing launched, or every gate passed."""
    history = evidence["gate_history"]
    g2 = [r for r in history if r["gate"] == "G2"]
    if state["exit_status"] == "success":
        assert all(evidence["gates"][f"G{i}"]["passed"] for i in range(7))
        return
    assert g2 and not any(r["passed"] for r in g2), [(r["gate"], r["summary"][:200]) for r in history]
    summary = g2[-1]["summary"]
    assert re.match(r"cutoff_len \d+ cuts the media tokens of ", summary), summary
    cutoff = int(summary.split()[1])
    assert int(re.search(r"cutoff_len to at least (\d+)", summary).group(1)) > cutoff
    assert not [r for r in history if r["gate"] in ("G4", "G5", "G6")], "launched after G2 failed"


@pytest.mark.parametrize("family", REALSCALE)
def test_realscale_source_through_the_rules_policy_on_the_standin(tmp_path, family):
    from msmigrate.testbeds.standin import write_standin

    source = _source(family, tmp_path / family)
    target = write_standin(tmp_path / "MindSpeed-MM", with_assets=False)
    spec = RunSpec(source=source, target=target, model_name=family, policy="rules",
                   launch={"gate_train_iters": 5, "timeout_s": 1800, "no_output_timeout_s": 900})
    run = Run(spec, new_run_id(family), Settings(runs_dir=tmp_path / "runs"))
    try:
        state = run.drive()
    finally:
        run.close()
    _check_end(json.loads((run.run_dir / "evidence.json").read_text()), state)


@pytest.mark.parametrize("family", REALSCALE)
def test_realscale_source_through_the_rules_policy_on_the_real_checkout(tmp_path, family):
    sys.path.insert(0, str(REALMM))
    from realmm_helpers import msmigrate, real_target

    spec_of = importlib.util.spec_from_file_location("realmm_conftest", REALMM / "conftest.py")
    realmm_conftest = importlib.util.module_from_spec(spec_of)
    spec_of.loader.exec_module(realmm_conftest)
    snapshots, python = realmm_conftest.snapshot_dir(), _runtime_python()
    if snapshots is None or python is None:
        pytest.skip("needs the real MindSpeed-MM snapshots and MSMIGRATE_REAL_RUNTIME (see tests/realmm/conftest.py)")
    target = real_target(tmp_path / "t", snapshots, python)["target"]
    source = _source(family, tmp_path / "src")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"source": str(source), "target": target, "model_name": family,
                                    "runtime_python": python, "policy": "rules",
                                    "launch": {"timeout_s": 1800, "no_output_timeout_s": 900}}))
    proc = msmigrate("run", str(spec), "--runs-dir", str(tmp_path / "runs"), timeout=7200)
    summary = json.loads(proc.stdout)
    evidence = json.loads((tmp_path / "runs" / summary["run_id"] / "evidence.json").read_text())
    _check_end(evidence, summary)
