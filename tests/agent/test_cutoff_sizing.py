"""``cutoff_len`` sized by the source's measured sample lengths: the draft raises the similar example's value to the
longest sample the source's processor renders untruncated (never lowers it, and says why), and G2's cutoff finding
carries the needed minimum as data, which the rules policy's config repair sets. A LLaVA-1.5-like source (576 image
tokens per image) under an example's ``cutoff_len: 256`` failed G2 twice on the identical target before this."""

from __future__ import annotations

import sys

from msmigrate.agent.routes.fsdp2.cutoff_size import CUTOFF_PATH, sized_cutoff
from msmigrate.agent.routes.fsdp2.draft_config import draft_config, load_baseline
from msmigrate.agent.routes.fsdp2.gates.data_gate import cutoff_findings
from msmigrate.agent.routes.fsdp2.rules.autofix import apply_failure, get_path
from msmigrate.agent.routes.fsdp2.rules.config import _findings
from msmigrate.tools import yaml_roundtrip as rt
from msmigrate.tools.runtime import run_probe
from msmigrate.tools.target_checks import PROBE_ENV

PLAN = {"model_id": "qwen2_vl", "route": "transformers", "dataset_type": "huggingface", "template": "qwen2vl",
        "collator": "qwen3vl", "plugin_dir": "mindspeed_mm/fsdp/models/qwen2_vl",
        "data_plugin": "mindspeed_mm/fsdp/data/datasets/huggingface"}
EXAMPLE = "examples/qwen3vl/qwen3vl_config.yaml"


def _draft(workspace, cutoff_len, notes=None):
    baseline, _, _ = load_baseline(workspace["target"], EXAMPLE)
    baseline["data"]["dataset_param"]["basic_parameters"]["cutoff_len"] = cutoff_len
    plan = {**PLAN, "media_expansion": workspace["expansion"].to_dict()}
    return draft_config(plan, baseline, source=workspace["source"], data_json=workspace["source"] / "data" /
                        "train.json", tree={}, notes=notes)


def test_the_probe_measures_each_samples_full_length(workspace):
    rows = workspace["expansion"].sample_lengths
    assert rows and all(r["length"] > r["media"] > 0 for r in rows), rows
    first = workspace["expansion"].per_image[0]
    assert rows[0]["media"] % first.count == 0  # whole images: the sample's media is its images' expansions


def test_sizing_raises_never_lowers_and_says_why():
    plan = {"media_expansion": {"sample_lengths": [{"sample": 0, "length": 600, "media": 576},
                                                   {"sample": 3, "length": 616, "media": 576},
                                                   {"sample": 4, "error": "template failed"}]}}
    value, why = sized_cutoff(plan, 256)
    assert value == 616 and "256" in why and "616" in why and "sample 3" in why and "576" in why
    assert sized_cutoff(plan, 4096) == (None, None)  # the example's longer cut stays
    assert sized_cutoff(plan, None) == (None, None)  # no value to size: the target's default applies
    assert sized_cutoff({}, 256) == (None, None)  # nothing measured


def test_the_draft_raises_the_examples_cutoff_to_the_longest_sample(workspace):
    longest = max(r["length"] for r in workspace["expansion"].sample_lengths)
    notes: list[str] = []
    cfg = _draft(workspace, 12, notes)
    assert get_path(cfg, CUTOFF_PATH) == longest and any("raised from the similar example's 12" in n for n in notes)
    notes = []
    assert get_path(_draft(workspace, longest + 100, notes), CUTOFF_PATH) == longest + 100
    assert not [n for n in notes if CUTOFF_PATH in n]  # the example's longer cut stays, unremarked


def test_the_drafted_cutoff_cuts_no_media_in_the_target_pipeline(workspace, tmp_path):
    """The probe's lengths and G2's cutoff check measure the same thing: a draft from an example whose cutoff cuts
    every sample's media passes the check."""
    cfg = _draft(workspace, 12)
    cfg["data"]["dataset_param"]["basic_parameters"]["cache_dir"] = str(tmp_path / "cache")
    config = tmp_path / "config.yaml"
    config.write_text(rt.dump(cfg))
    source, target = workspace["source"], workspace["target"]
    res = run_probe(sys.executable, "data_check",
                    ["--target", str(target), "--config", str(config), "--parity-source", str(source),
                     "--parity-data", str(source / "data" / "train.json"),
                     "--media-token-id", str(workspace["expansion"].media_token_id)],
                    cwd=target, env_extra=PROBE_ENV, timeout=300)
    assert res.ok, res.error
    cutoff = res.data["result"]["cutoff"]
    assert cutoff["checked"] >= 1 and cutoff["cut"] == [] and cutoff_findings(cutoff) == []


CUT = {"cutoff_len": 256, "checked": 16,
       "cut": [{"sample": i, "kept": 200, "full": 576, "length": 256, "full_length": 600 + i} for i in range(16)]}


def test_g2s_finding_carries_the_minimum_and_the_repair_sets_it():
    found = cutoff_findings(CUT)
    assert found[0]["path"] == CUTOFF_PATH and found[0]["minimum"] == 615 and found[0]["value"] == 256
    assert found[0]["message"].endswith(f"raise {CUTOFF_PATH} to at least 615")
    cfg = {"data": {"dataset_param": {"basic_parameters": {"cutoff_len": 256}}}}
    done = apply_failure(cfg, {"gate": "G2", "autofix": []}, found, None)
    assert get_path(cfg, CUTOFF_PATH) == 615 and done
    cfg = {"data": {"dataset_param": {"basic_parameters": {"cutoff_len": 2048}}}}
    assert apply_failure(cfg, {"gate": "G2", "autofix": []}, found, None) == [] and \
        get_path(cfg, CUTOFF_PATH) == 2048  # never lowered


def test_the_config_phase_reads_the_failed_gates_findings_from_its_record():
    g2 = {"gate": "G2", "passed": False, "findings": cutoff_findings(CUT)}
    g3 = {"gate": "G3", "passed": True, "evidence": [{"metrics": {"findings": []}}]}
    state = {"gates": {}, "gate_history": [g2, g3], "last_failure": {"gate": "G2"}}
    assert [f["minimum"] for f in _findings(state)] == [615]
    assert _findings({**state, "last_failure": {"gate": "G3"}}) == []


def test_the_finding_routes_to_config_before_any_yaml_is_delivered():
    """G2 checks a draft before the config phase writes the YAML: the run's YAML keys are empty then, so the text
    remedy cannot name a key of it; the finding's data routes the failure to config all the same."""
    from msmigrate.knowledge.failure_context import finding_remedy_owner

    verdict = finding_remedy_owner(cutoff_findings(CUT))
    assert verdict is not None and verdict.owner == "config" and "at least 615" in verdict.reason
    assert finding_remedy_owner([]) is None
    assert finding_remedy_owner([{"severity": "error", "code": "x", "path": "a.b"}]) is None  # no value to set
