"""The real-log corpus: size, labels, the fixed split, and that nothing was fitted on the held-out half."""

import json
import re

import pytest

from msmigrate.knowledge.catalog import CatalogError, _check_failure, load_catalog
from msmigrate.knowledge.owners import OWNERS, owner_semantics_text
from msmigrate.knowledge.real_log_corpus import load_corpus, split_of

CORPUS = load_corpus()
FAILURES = [e for e in CORPUS if not e.healthy]


def test_size_owners_and_sources():
    assert len(FAILURES) >= 80 and len(CORPUS) - len(FAILURES) >= 10
    assert {e.owner for e in FAILURES} == set(OWNERS)
    assert all(re.match(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+$", e.source) for e in CORPUS)
    assert len({e.source for e in CORPUS}) == len(CORPUS)  # one excerpt per thread
    assert all(e.basis in ("resolution", "message") and e.resolution for e in FAILURES)


def test_split_is_a_fixed_function_of_the_url_and_both_halves_are_substantial():
    assert split_of("https://github.com/Ascend/pytorch/issues/7") == split_of("https://github.com/Ascend/pytorch/issues/7")
    halves = {s: [e for e in FAILURES if e.split == s] for s in ("tuning", "heldout")}
    assert min(len(v) for v in halves.values()) >= 35
    for owner in OWNERS:  # every owner is represented in both halves
        assert all(any(e.owner == owner for e in v) for v in halves.values()), owner


def test_round_four_was_added_whole_and_only_its_tuning_half_feeds_the_catalog():
    """Round 4 (labelled and committed before any of it was scored) holds at least 60 excerpts; none of its held-out
    half is a real example, and the calibration was computed over every round of the tuning half."""
    from msmigrate.knowledge.classifier import CALIBRATION_FILE
    fourth = [e for e in CORPUS if e.round == 4]
    assert len(fourth) >= 60 and sum(e.healthy for e in fourth) >= 5
    examples = {x["source"] for e in load_catalog().failures() for x in e.meta.get("real_examples", [])}
    assert not {e.source for e in fourth if e.split == "heldout"} & examples
    assert json.loads(CALIBRATION_FILE.read_text())["max_round"] is None


def test_catalog_real_examples_come_from_the_tuning_half_only():
    examples = [x for e in load_catalog().failures() for x in e.meta.get("real_examples", [])]
    assert len(examples) >= 20
    tuning = {e.source: e.log for e in CORPUS if e.split == "tuning"}
    for example in examples:
        assert example["source"] in tuning, example["source"]
        assert example["text"] in tuning[example["source"]]  # verbatim


def test_a_held_out_example_is_rejected_at_load_time():
    held_out = next(e.source for e in CORPUS if e.split == "heldout")
    meta = {"title": "t", "owner": "data", "patterns": ["x"], "finding_codes": [], "cause": "c", "fix": "f",
            "example": "x", "real_examples": [{"source": held_out, "text": "x"}]}
    with pytest.raises(CatalogError, match="held-out"):
        _check_failure(meta, "t.md")


def test_shipped_calibration_is_reproduced_from_the_tuning_half():
    import importlib.util
    from pathlib import Path

    from msmigrate.knowledge.classifier import CALIBRATION_FILE
    script = Path(__file__).resolve().parents[2] / "scripts" / "calibrate_classifier.py"
    spec = importlib.util.spec_from_file_location("calibrate_classifier", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shipped = json.loads(CALIBRATION_FILE.read_text())
    population, max_round = shipped["population"], shipped["max_round"]
    regex_cases = module.with_decisiveness(module.regex_reliability("tuning", max_round), shipped["target"],
                                           shipped["confidence"])
    votes = module.lexical_votes("tuning", population, max_round, regex_cases, shipped["target"])
    again = module.calibrate(votes, shipped["target"], shipped["min_support"], population, max_round, regex_cases)
    assert again["min_margin"] == shipped["min_margin"] and again["votes"] == shipped["votes"]
    assert again["regex_cases"] == shipped["regex_cases"]


def test_a_case_right_five_of_six_times_is_decisive_and_one_shown_below_target_is_not():
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "calibrate_classifier.py"
    spec = importlib.util.spec_from_file_location("calibrate_classifier", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cases = module.with_decisiveness({"a": {"hits": 6, "agree": 5}, "b": {"hits": 7, "agree": 6},
                                      "c": {"hits": 12, "agree": 7}, "d": {"hits": 1, "agree": 0},
                                      "e": {"hits": 3, "agree": 3}}, 0.9, 0.9)
    assert [c for c, rec in cases.items() if rec["decisive"]] == ["a", "b", "e"]


def test_owner_semantics_are_written_once_and_rendered_in_the_prompt():
    from msmigrate.prompts.render import render
    from msmigrate.prompts.sample_state import sample_vars
    from msmigrate.knowledge.owners import deciding_facts_text
    text = owner_semantics_text()
    assert all(f"- {owner}:" in text for owner in OWNERS)
    prompt = render("classify", **sample_vars("classify"))
    assert text in prompt
    # the facts that decide between two owners are written once too, and the answer names the owners that fit
    assert deciding_facts_text() in prompt and '"fits"' in prompt
