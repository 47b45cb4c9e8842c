"""classify(): regex precedence, finding codes, BM25 fallback, abstention, and the labeled set."""

import pytest

from msmigrate.knowledge.classifier import classify, error_lines
from msmigrate.knowledge.labeled_set import load_labeled

WRAPPER = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
mindspeed_mm/fsdp/train/trainer.py FAILED
  exitcode  : 1 (pid: 4242)"""


def test_specific_root_cause_beats_torchrun_wrapper():
    log = "RuntimeError: [FSDP2] No module named ['blocks.{*}'].\n" + WRAPPER
    result = classify(log)
    assert (result.case_id, result.owner, result.method) == ("fsdp-apply-modules-no-match", "config", "regex")
    assert result.autofix == [{"action": "apply_modules_from_tree"}]
    assert "FSDP2" in result.excerpt


def test_wrapper_alone_is_named_as_wrapper():
    assert classify(WRAPPER).case_id == "torchrun-child-failed"


def test_priority_resolves_declared_overlap():
    log = "Import failed: mindspeed_mm.fsdp.models.foo. Error: No module named 'mindspeed_mm.fsdp.models.foo'\n" \
          "KeyError: \"ID 'foo' is not registered.\""
    result = classify(log)
    assert result.case_id == "plugin-import-failed"
    assert [c["case_id"] for c in result.candidates] == ["plugin-import-failed", "model-id-not-registered"]


def test_plugin_string_is_more_specific_than_generic_bad_type():
    log = "training.plugin\n  Input should be a valid list [type=list_type, input_value='a', input_type=str]"
    result = classify(log)
    assert result.case_id == "plugin-not-list"
    assert result.autofix == [{"action": "wrap_yaml_list", "path": "training.plugin"}]


def test_env_autofix_for_megatron():
    result = classify("ModuleNotFoundError: No module named 'megatron'")
    assert result.owner == "environment"
    assert result.autofix == [{"action": "set_env", "name": "NON_MEGATRON", "value": "true"}]


@pytest.mark.parametrize("code, case_id", [
    ("bad-type", "config-bad-type"),
    ("collator-missing", "collator-not-specified"),
    ("recompute-no-past-key-values", "recompute-past-key-values"),
    ("flash-attn-on-cpu", "flash-attn-unavailable"),
    ("weakened-config", "weakened-config"),
    ("pattern-no-match", "fsdp-pattern-partial-no-match"),
])
def test_finding_codes_resolve_without_log(code, case_id):
    result = classify("", [code])
    assert result.case_id == case_id and result.method == "regex" and result.matched == f"finding:{code}"


def test_log_regex_takes_precedence_over_finding_codes():
    assert classify("ValueError: Template None does not exist.", ["bad-type"]).case_id == "template-unknown"


@pytest.mark.parametrize("log, case_id", [
    ("ERROR: collate_param has no collator_id and the dataset defines no collate_fn", "collator-not-specified"),
    ("apply_modules patterns did not match any module in named_modules of the model", "fsdp-apply-modules-no-match"),
    ("RuntimeError: NPU error: HBM memory exhausted while allocating activation buffer", "device-oom"),
    ("loss went to nan at step 3, labels all masked?", "loss-non-finite"),
])
def test_bm25_fallback_on_paraphrase(log, case_id):
    # No regex matches these wordings; BM25 over the case texts still finds the case.
    result = classify(log)
    assert (result.method, result.case_id) == ("bm25", case_id)
    assert 0 < result.confidence < 0.9


@pytest.mark.parametrize("log", [
    "Segmentation fault (core dumped)",
    "hello world, everything fine",
    "",
])
def test_abstains_when_nothing_is_close(log):
    result = classify(log)
    assert result.method == "none" and result.case_id is None and result.owner is None


def test_error_lines_drop_wrapper_noise():
    text = error_lines("ValueError: real problem\n" + WRAPPER)
    assert "real problem" in text and "ChildFailedError" not in text


def test_labeled_set_size_and_accuracy():
    samples = load_labeled()
    assert len(samples) >= 45
    owner_ok = sum(classify(s.log).owner == s.expected_owner for s in samples)
    assert owner_ok / len(samples) >= 0.9


def test_labeled_logs_differ_from_catalog_examples():
    from msmigrate.knowledge.catalog import load_catalog
    examples = {e.meta["example"].strip() for e in load_catalog().failures()}
    assert not [s.name for s in load_labeled() if s.log.strip() in examples]


@pytest.mark.parametrize("code, case_id", [
    ("type-mismatch", "config-bad-type"),
    ("weakened-train-iters", "weakened-config"),
    ("yaml-unquoted-pattern", "yaml-flow-list-brace"),
    ("recompute-rejects-past-key-values", "recompute-past-key-values"),
    ("bad-dtype", "dtype-unsupported"),
    ("dataset-type-outside-plugin", "dataset-type-not-registered"),
])
def test_validator_codes_map_through_aliases(code, case_id):
    assert classify("", [code]).case_id == case_id


def test_wrapper_hit_yields_to_finding_code_and_bm25():
    assert classify(WRAPPER, ["collator-missing"]).case_id == "collator-not-specified"
    unknown_wording = "ERROR: collate_param has no collator_id and the dataset defines no collate_fn\n" + WRAPPER
    result = classify(unknown_wording)
    assert (result.method, result.case_id) == ("bm25", "collator-not-specified")
    # nothing recognisable besides the wrapper: the wrapper case stands
    assert classify("some opaque message\n" + WRAPPER).case_id == "torchrun-child-failed"
