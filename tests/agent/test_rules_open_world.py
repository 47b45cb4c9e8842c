"""The rules policy on transformers-native families whose data contracts the first fixtures do not have: one
end-to-end migration per contract kind (integration: real probes, real torchrun), and the honest decline of the
architectures it cannot migrate (no launch: it stops before the model phase does anything)."""

from __future__ import annotations

import json

import git
import pytest

from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.runner import Run, new_run_id

from delivery_checks import assert_mergeable

ALL_GATES = ["G0", "G1", "G2", "G3", "G4", "G5", "G6"]


def _run(migration_inputs, tmp_path, family: str):
    source, target = migration_inputs(family)
    spec = RunSpec(source=source, target=target, model_name=family, policy="rules",
                   launch={"gate_train_iters": 5, "timeout_s": 600})
    run = Run(spec, new_run_id(family), Settings(runs_dir=tmp_path / "runs"))
    try:
        state = run.drive()
    finally:
        run.close()
    return state, run, target


def _green(state, run) -> dict:
    assert state["exit_status"] == "success", state.get("exit_detail")
    evidence = json.loads((run.run_dir / "evidence.json").read_text())
    assert all(evidence["gates"][g]["passed"] for g in ALL_GATES)
    assert_mergeable(evidence, run.spec.target, run.run_id, run.spec.source, run_dir=run.run_dir)
    return evidence


@pytest.mark.integration
def test_size_dependent_expansion_with_image_sizes(migration_inputs, tmp_path):
    """LLaVA-NeXT: the count follows each image's size, and the vision tower needs image_sizes."""
    state, run, target = _run(migration_inputs, tmp_path, "llava_next")
    evidence = _green(state, run)
    plan = evidence["plan"]
    assert plan["media_expansion"]["kind"] == "per_image"
    assert set(plan["data_contract"]["mm_input_keys"]) == {"pixel_values", "image_sizes"}
    g2 = evidence["gates"]["G2"]["evidence"][0]["metrics"]["batch_keys"]
    assert {"pixel_values", "image_sizes"} <= set(g2)
    # the edits are commits on the run's work branch (the user's checkout is left as it was)
    plugin = git.Repo(target).git.show(
        f"msmigrate/{run.run_id}:mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py")
    # one shared base in the framework's module, the model's plugin a subclass naming its facts
    assert plugin.count("class ProcessorExpansionPlugin(BasePlugin)") == 1
    # (generated Python comes out as black writes it: double-quoted strings)
    assert "class LlavaNextPlugin(ProcessorExpansionPlugin)" in plugin and '    processor_class = "LlavaNextProcessor"\n' in plugin


@pytest.mark.integration
def test_prefix_lm_gets_token_type_ids_from_a_generated_collator(migration_inputs, tmp_path):
    """PaliGemma: no roles; token_type_ids (0 prefix, 1 suffix) computed by the collator; processor labels dropped;
    the <bos> its processor writes once after the last image run is in the target's ids (G2's data parity)."""
    state, run, target = _run(migration_inputs, tmp_path, "paligemma")
    evidence = _green(state, run)
    plan = evidence["plan"]
    assert plan["collator"] == "paligemma"
    assert plan["data_contract"]["collator_derives"] == {"token_type_ids": "suffix"}
    assert any("labels dropped" in r for r in plan["reasons"])
    g2 = evidence["gates"]["G2"]["evidence"][0]["metrics"]["batch_keys"]
    assert "token_type_ids" in g2 and "mm_token_type_ids" not in g2
    parity = evidence["gates"]["G2"]["parity"]["data"]
    assert parity["status"] == "pass" and parity["prompt_match"] and "<bos>" in parity["decoded_sample"]


@pytest.mark.parametrize("family,kind", [("florence2", "encoder-decoder"), ("chameleon", "early-fusion")])
def test_architectures_beyond_the_policy_are_declined_at_once(migration_inputs, tmp_path, family, kind):
    state, run, target = _run(migration_inputs, tmp_path, family)
    assert state["exit_status"] == "unsupported_by_policy"
    assert state["counters"]["policy_steps"] == 1 and state["counters"].get("launches", 0) == 0
    assert sorted(state["gates"]) == ["G0"]  # nothing after the precheck ran
    assert state["plan"]["architecture"] == kind
    first = (run.run_dir / "verification_report.md").read_text().splitlines()[0]
    # the advice says what is missing (a training path for this kind), not "use another policy" (6686f52)
    assert first.startswith("**unsupported_by_policy**") and kind in first and "no training path" in first
    assert ("encoder and decoder inputs" in first) == (kind == "encoder-decoder")
