"""A rules run whose similar example's ``cutoff_len`` cuts every sample's media (as an example's 256 cuts a
LLaVA-1.5-like source's 576 image tokens): the draft sizes it from the measured sample lengths, G2 passes at the
first try, and the delivered YAML carries the raised value. Before, G2 failed twice on the identical target and the
run ended gates_failed."""

from __future__ import annotations

import re
from pathlib import Path

import git
import pytest
import yaml

from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.policies.rules import RulesPolicy
from msmigrate.agent.runner import Run, new_run_id

pytestmark = pytest.mark.integration


def test_the_rules_run_raises_an_examples_cutoff_that_cuts_the_media(migration_inputs, tmp_path):
    source, target = migration_inputs("llava")
    repo = git.Repo(target)
    lowered = []
    for example in sorted((target / "examples").glob("*/*.yaml")):  # whichever example the ranking picks
        text, n = re.subn(r"cutoff_len: \d+", "cutoff_len: 12", example.read_text())
        if n:
            example.write_text(text)
            lowered.append(str(example.relative_to(target)))
    assert lowered
    repo.git.add(*lowered)
    repo.index.commit("examples whose cutoff cuts the fixture's media")
    spec = RunSpec(source=source, target=target, model_name="llava", policy="rules",
                   launch={"gate_train_iters": 5, "timeout_s": 600})
    run = Run(spec, new_run_id("llava"), Settings(runs_dir=tmp_path / "runs"), policy=RulesPolicy())
    state = run.drive()
    run.close()
    assert state["exit_status"] == "success", state.get("exit_detail")
    assert state["plan"]["similar_case"] in lowered
    longest = max(r["length"] for r in state["plan"]["media_expansion"]["sample_lengths"])
    g2 = [r for r in state["gate_history"] if r["gate"] == "G2"]
    assert g2 and all(r["passed"] for r in g2)
    delivered = yaml.safe_load(repo.git.show(f"msmigrate/{run.run_id}:{state['plan']['config_path']}"))
    assert delivered["data"]["dataset_param"]["basic_parameters"]["cutoff_len"] == longest > 12
