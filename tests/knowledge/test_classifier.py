"""classify(): regex precedence, finding codes, BM25 fallback, abstention, and the labeled set."""

import pytest

from msmigrate.knowledge.classifier import classify, error_lines, load_calibration
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
    log = ("[ERROR] Configuration loading failed: 1 validation error for Arguments\ntraining.plugin\n"
           "  Input should be a valid list [type=list_type, input_value='a', input_type=str]")
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


PERMISSIVE = {"min_margin": 0.0, "bins": [{"margin": 0.0, "precision": 0.5}]}  # accepts any lexical vote


@pytest.mark.parametrize("log, case_id", [
    ("ERROR: collate_param has no collator_id and the dataset defines no collate_fn", "collator-not-specified"),
    ("RuntimeError: apply_modules patterns matched no module in named_modules of the model",
     "fsdp-apply-modules-no-match"),
    ("RuntimeError: NPU error: HBM memory exhausted while allocating activation buffer", "device-oom"),
    ("RuntimeError: loss went to nan at step 3, labels all masked?", "loss-non-finite"),
])
def test_lexical_vote_names_the_case_of_a_paraphrase(log, case_id):
    # No regex matches these wordings; the BM25 owner vote still points at the right case ...
    result = classify(log, calibration=PERMISSIVE)
    assert (result.method, result.case_id) == ("bm25", case_id)
    assert result.confidence == 0.5  # the confidence is the calibrated precision, not a score
    # the shipped calibration (tuning half of the real-log corpus) accepts a vote only above its margin
    shipped, calibration = classify(log), load_calibration()
    assert shipped.method in ("bm25", "none")
    if shipped.method == "none":
        assert calibration["min_margin"] is None or shipped.vote["margin"] < calibration["min_margin"]
    else:  # accepted: the right case, with the precision the calibration measured at or below that margin
        measured = [b["precision"] for b in calibration["bins"] if shipped.vote["margin"] >= b["margin"]]
        assert shipped.case_id == case_id and shipped.confidence == round(measured[-1], 3)


def test_lexical_stage_needs_a_calibration():
    log = "RuntimeError: NPU error: HBM memory exhausted while allocating activation buffer"
    assert classify(log, calibration={"min_margin": None, "bins": []}).method == "none"
    high = {"min_margin": 0.99, "bins": [{"margin": 0.99, "precision": 0.95}]}
    assert classify(log, calibration=high).method == "none"


@pytest.mark.parametrize("log", [
    "Segmentation fault (core dumped)",
    "hello world, everything fine",
    "",
])
def test_abstains_when_nothing_is_close(log):
    result = classify(log)
    assert result.method == "none" and result.case_id is None and result.owner is None


def test_error_lines_put_the_root_cause_before_the_wrapper():
    text = error_lines("ValueError: real problem\n" + WRAPPER)
    assert text.splitlines()[0] == "ValueError: real problem"  # the wrapper line stays, last
    assert classify("ValueError: real problem\n" + WRAPPER).case_id is None  # an unknown root cause is unknown


def test_info_and_warning_lines_never_decide():
    healthy = ("[INFO] HCCL_CONNECT_TIMEOUT=1200, HCCL timeout handling enabled\n"
               "/usr/lib/python3/site-packages/transformers/processing_utils.py:101: FutureWarning: the processor "
               "argument is deprecated; ImageProcessor was not found in the legacy location\n"
               "iteration        2/      10 | loss: 3.210000E+00 | grad norm: 1.200 |")
    result = classify(healthy)
    assert (result.method, result.owner) == ("none", None)
    assert "No failure signal" in result.diagnosis


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


def test_wrapper_hit_yields_to_finding_code_and_accepted_lexical_vote():
    assert classify(WRAPPER, ["collator-missing"]).case_id == "collator-not-specified"
    unknown_wording = "ERROR: collate_param has no collator_id and the dataset defines no collate_fn\n" + WRAPPER
    result = classify(unknown_wording, calibration=PERMISSIVE)
    assert (result.method, result.case_id) == ("bm25", "collator-not-specified")
    # not accepted by the shipped calibration, and a real root cause that nothing explains is unknown, not the
    # wrapper; the wrapper case is named only when there is nothing but the wrapper
    assert (classify(unknown_wording).case_id, classify(unknown_wording).method) == (None, "none")
    assert classify("some opaque message\n" + WRAPPER).case_id == "torchrun-child-failed"


def test_the_gates_own_verdict_is_evidence_even_over_an_info_only_log():
    info_only = "[INFO] iteration 1 done\n[INFO] collated batch keys: input_ids, image_grid_thw"
    verdict = "forward() got an unexpected keyword argument 'image_grid_thw' (batch key from the collator)"
    assert classify(info_only).method == "none"
    result = classify(info_only, gate_verdict=[verdict])
    assert (result.case_id, result.owner, result.method) == ("batch-key-rejected-by-forward", "model", "regex")
    assert result.root_cause["primary"]["kind"] == "gate"
    # the gate's own check decides its case even when public logs showed that message with several owners; the
    # same message in the run's output alone is then not decisive
    mixed = {"min_margin": None, "bins": [], "target": 0.9,
             "regex_cases": {"batch-key-rejected-by-forward": {"hits": 4, "agree": 2}}}
    assert classify(info_only, gate_verdict=[verdict], calibration=mixed).owner == "model"
    assert classify("TypeError: " + verdict, calibration=mixed).method == "none"


def test_a_message_the_tuning_corpus_shows_with_several_owners_is_not_decisive():
    log = "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity)"
    trusted = classify(log, calibration={"min_margin": None, "bins": [], "target": 0.9,
                                         "regex_cases": {"device-oom": {"hits": 9, "agree": 9}}})
    assert (trusted.method, trusted.case_id, trusted.owner) == ("regex", "device-oom", "config")
    mixed = classify(log, calibration={"min_margin": None, "bins": [], "target": 0.9,
                                       "regex_cases": {"device-oom": {"hits": 4, "agree": 3}}})
    assert (mixed.method, mixed.owner) == ("none", None)
    assert mixed.candidates[0]["case_id"] == "device-oom" and "3 of 4" in mixed.diagnosis
    assert mixed.matched  # the pattern that matched is kept for the report


def test_the_issue_example_of_a_data_plugin_called_with_the_wrong_arity_is_data():
    result = classify("TypeError: Qwen2vlPlugin.get_mm_inputs() takes 5 positional arguments but 9 were given")
    assert (result.method, result.owner, result.case_id) == ("regex", "data", "data-call-signature")


def test_an_abstention_lists_every_case_whose_message_matches_a_line():
    """Candidates are not only the BM25 neighbours: a case whose pattern matches a failure line (here a wrapper
    case, and a specific case matched on a line the extractor did not pick) is among them."""
    from msmigrate.knowledge.classifier import classify

    log = ("ValueError: the frobnicator rejected widget 7\n"
           "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
           "Root Cause (first observed failure):\n[0]:\n  rank      : 0 (local_rank: 0)\n"
           "  exitcode  : 1 (pid: 11)\n============================================================")
    result = classify(log)
    assert result.method == "none"
    assert "torchrun-child-failed" in [c["case_id"] for c in result.candidates]


def test_a_key_error_from_the_auto_config_mapping_is_an_unknown_model_type():
    from msmigrate.knowledge.classifier import classify

    log = """Traceback (most recent call last):
  File "/x/finetune.py", line 20, in train
    config = transformers.AutoConfig.from_pretrained(path)
  File "/env/site-packages/transformers/models/auto/configuration_auto.py", line 1022, in from_pretrained
    config_class = CONFIG_MAPPING[config_dict["model_type"]]
  File "/env/site-packages/transformers/models/auto/configuration_auto.py", line 723, in __getitem__
    raise KeyError(key)
KeyError: 'newarch'"""
    result = classify(log)
    assert "transformers-unknown-model-type" in [result.case_id] + [c["case_id"] for c in result.candidates]
    assert classify("KeyError: 'newarch'").case_id != "transformers-unknown-model-type"  # a bare KeyError is not


def test_the_lexical_query_leaves_traceback_frame_paths_out():
    from msmigrate.knowledge.catalog import load_catalog
    from msmigrate.knowledge.classifier import lexical

    message = "TypeError: forward() missing 1 required positional argument: 'pixel_mask'"
    frames = ('File "/home/u/.local/lib/python3.8/site-packages/torch/nn/modules/module.py", line 1110, in _call_impl\n'
              'File "/opt/conda/lib/python3.10/site-packages/transformers/modeling_utils.py", line 88, in wrapper\n')
    catalog = load_catalog()
    assert lexical(frames + message, catalog).candidates == lexical(message, catalog).candidates
    assert lexical(frames, catalog) is not None  # frames alone (a cut traceback) are still a query


def test_a_plain_line_stating_a_known_message_is_a_failure_line():
    # no class, no level, no traceback: the extractor has no rule for it, but the catalog knows the message
    log = ("loading the checkpoint\nYou can't train a model that has been loaded with `device_map='auto'` in any "
           "distributed mode. Please rerun your script specifying `--num_processes=1`.\n")
    result = classify(log)
    assert (result.method, result.case_id) == ("regex", "device-map-auto-distributed")
    assert result.root_cause["primary"]["kind"] == "known_message"
    # the same words in a warning decide nothing (and never make a healthy log a failure)
    warned = classify("WARNING: You can't train a model that has been loaded with `device_map='auto'` in any "
                      "distributed mode, using one process\n")
    assert warned.owner is None


def test_a_message_matched_only_outside_the_failure_lines_is_marked_so():
    log = ("UserWarning: GPTNeoXForCausalLM does not support `device_map='auto'` yet\n"
           "RuntimeError: something nobody has written down happened in step 3\n")
    result = classify(log)
    assert result.method == "none"
    marked = [c for c in result.candidates if c.get("case_id") == "model-no-split-modules"]
    assert marked and marked[0]["outside_failure_lines"] is True


def test_a_bus_error_in_a_collective_library_is_the_containers_shared_memory():
    log = ("[host:2498 :0:2599] Caught signal 7 (Bus error: nonexistent physical address)\n"
           " 2 0x000000000006929c ncclGroupEnd()  ???:0\n"
           "Fatal Python error: Bus error\n")
    result = classify(log)
    assert (result.method, result.case_id, result.owner) == ("regex", "shared-memory-bus-error", "environment")
