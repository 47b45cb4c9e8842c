"""The rules policy on real-scale sources (the published configuration, 2 layers per tower, a multi-shard
checkpoint, images the published processor expands into hundreds of tokens) on the stand-in target. The similar
example's cutoff_len (256) is shorter than one such sample, as real users meet it: G2 must stop the run with the
numbers (kept vs full media tokens, the length needed) before any training launch; with cutoff_len raised to what
G2 asks, the delivery trains from the checkpoint's weights through G6."""

from __future__ import annotations

import json
import re

import pytest

from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.runner import Run, new_run_id

pytestmark = [pytest.mark.realscale, pytest.mark.integration]


def _run(source, target, runs, family):
    spec = RunSpec(source=source, target=target, model_name=family, policy="rules",
                   launch={"gate_train_iters": 5, "timeout_s": 1800, "no_output_timeout_s": 900})
    run = Run(spec, new_run_id(family), Settings(runs_dir=runs))
    try:
        return run.drive(), run
    finally:
        run.close()


@pytest.mark.parametrize("family", ["qwen2_vl", "llava"])
def test_realscale_source_through_the_rules_policy(tmp_path, family):
    from msmigrate.testbeds.fixtures.realscale import build_realscale_source
    from msmigrate.testbeds.standin import write_standin

    source = build_realscale_source(family, tmp_path / family)
    assert len(list(source.glob("model-*-of-*.safetensors"))) > 1 and (source / "model.safetensors.index.json").is_file()
    target = write_standin(tmp_path / "MindSpeed-MM", with_assets=False)
    state, run = _run(source, target, tmp_path / "runs", family)
    evidence = json.loads((run.run_dir / "evidence.json").read_text())
    assert state["exit_status"] != "success"
    g2 = [r for r in evidence["gate_history"] if r["gate"] == "G2"]
    assert g2 and not any(r["passed"] for r in g2)
    summary = g2[-1]["summary"]
    assert summary.startswith("cutoff_len 256 cuts the media tokens of "), summary
    need = int(re.search(r"cutoff_len to at least (\d+)", summary).group(1))
    assert need > 256
    assert not [r for r in evidence["gate_history"] if r["gate"] in ("G4", "G5", "G6")], "launched after G2 failed"
