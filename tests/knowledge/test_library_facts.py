"""Library facts: a refused model type checked against the installed transformers' registry decides the owner."""

import pytest

from msmigrate.knowledge import library_facts
from msmigrate.knowledge.classifier import classify
from msmigrate.knowledge.library_facts import check_fact, named_model_type

UNKNOWN = ("ValueError: The checkpoint you are trying to load has model type `{}` but Transformers does not recognize "
           "this architecture. This could be because of an issue with the checkpoint, or because your version of "
           "Transformers is out of date.")
KEYERROR = '''Traceback (most recent call last):
  File "/opt/venv/lib/python3.10/site-packages/transformers/models/auto/configuration_auto.py", line 1022, in from_pretrained
    config_class = CONFIG_MAPPING[config_dict["model_type"]]
  File "/opt/venv/lib/python3.10/site-packages/transformers/models/auto/configuration_auto.py", line 723, in __getitem__
    raise KeyError(key)
KeyError: '{}'
'''
# every decisive regex case agrees with its labels: what the calibration says of both cases once the fact splits them
TRUSTED = {"min_margin": None, "bins": [], "target": 0.9, "regex_cases": {}}


def test_named_model_type_reads_both_refusals():
    assert named_model_type(UNKNOWN.format("tinyvlm_x")) == "tinyvlm_x"
    assert named_model_type(classify(KEYERROR.format("qwen2")).root_cause["evidence"]) == "qwen2"
    assert named_model_type("KeyError: 'qwen2'") is None  # a KeyError elsewhere names no model type


@pytest.mark.parametrize("template", [UNKNOWN, KEYERROR])
def test_unpublished_model_type_is_the_models(template):
    result = classify(template.format("acme_private_vlm"), calibration=TRUSTED)
    assert (result.case_id, result.owner, result.method) == ("model-type-unpublished", "model", "regex")
    assert not result.tentative
    assert "not registered by transformers" in result.diagnosis


@pytest.mark.parametrize("template", [UNKNOWN, KEYERROR])
def test_published_model_type_is_an_old_install(template):
    result = classify(template.format("qwen2_vl"), calibration=TRUSTED)
    assert (result.case_id, result.owner) == ("transformers-unknown-model-type", "environment")
    assert "model-type-unpublished" not in [c["case_id"] for c in result.candidates]
    assert any("`qwen2_vl` is registered by transformers" in f for f in result.root_cause["facts"])


def test_without_transformers_the_fact_is_unknown_and_the_classifier_abstains(monkeypatch):
    monkeypatch.setattr(library_facts, "published_model_types", lambda: None)
    assert check_fact("model-type-unpublished", UNKNOWN.format("acme_private_vlm")) == (None, "")
    result = classify(UNKNOWN.format("acme_private_vlm"), calibration=TRUSTED)
    assert result.method == "none" and result.owner is None
    assert result.candidates[0]["case_id"] == "model-type-unpublished"


def test_the_checked_fact_reaches_the_llm_prompt_when_the_message_stays_undecided():
    from msmigrate.agent.nodes.classify import llm_evidence
    from msmigrate.prompts.render import render
    from msmigrate.prompts.sample_state import sample_vars

    # a calibration that distrusts the environment case: the published type leaves the message undecided
    distrusted = {**TRUSTED, "regex_cases": {"transformers-unknown-model-type": {"hits": 4, "agree": 2}}}
    result = classify(UNKNOWN.format("qwen2_vl"), calibration=distrusted)
    assert result.method == "none"
    evidence = llm_evidence("G1", result)
    assert any("`qwen2_vl` is registered by transformers" in f for f in evidence["root_cause"]["facts"])
    variables = sample_vars("classify")
    variables["last_failure"] = {**variables["last_failure"], **evidence}
    prompt = render("classify", **variables)
    assert "- checked in the installed libraries (facts, not log lines): model type `qwen2_vl` is registered" in prompt


def test_a_keyerror_without_its_frame_tells_the_llm_what_its_key_is_but_decides_nothing():
    from msmigrate.agent.nodes.classify import llm_evidence

    # transformers' version block, then the bare KeyError (the frame that raised it was not pasted)
    log = "- `transformers` version: 4.44.2\n- Python version: 3.10.12\nKeyError: 'qwen2_vl'\n"
    result = classify(log)
    assert result.method == "none" and result.owner is None  # a model zoo's own dict raises it too
    (fact,) = result.root_cause["facts"]
    assert "`qwen2_vl` is a model type that transformers registers (checked in msmigrate's own transformers" in fact
    assert fact in llm_evidence("G1", result)["root_cause"]["facts"]
    # a key no transformers release registers, a placed KeyError (the case's own fact) and a warning: no such hint
    assert classify("KeyError: 'acme_private_vlm'").root_cause["facts"] == []
    placed = classify(KEYERROR.format("qwen2_vl"), calibration=TRUSTED).root_cause["facts"]
    assert not any("does not show which mapping" in f for f in placed)
    assert classify("UserWarning: KeyError: 'llama' ignored").root_cause.get("facts", []) == []


@pytest.mark.parametrize("name, case, owner", [
    ("AlbertForMaskedLM", "library-class-no-gradient-checkpointing", "config"),  # transformers' own class
    ("AcmeVisionForCausalLM", "model-no-gradient-checkpointing", "model"),  # the project's own class
])
def test_a_class_lacking_gradient_checkpointing_is_checked_in_transformers(name, case, owner):
    result = classify(f"ValueError: {name} does not support gradient checkpointing.", calibration=TRUSTED)
    assert (result.case_id, result.owner, result.method) == (case, owner, "regex")
    assert f"`{name}` is" in result.diagnosis
