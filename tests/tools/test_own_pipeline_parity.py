"""G2's oracle where the source ships training code: the Phi-3.5-vision-layout fixture's own fine-tuning script
(its VQA dataset + collator) on its own records, against a target example of the same record. A faithful port
passes; each deviation from the source's training code fails with what differs and where the oracle read it:
a trained newline dropped, labels shifted twice (pre-shifted labels under the target's shifting loss), a media
span of another length."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from msmigrate.testbeds.fixtures import build_source
from msmigrate.tools.repo_reader.training_facts import source_training_facts

PROBES = Path(__file__).resolve().parents[2] / "msmigrate" / "tools" / "probes"
MEDIA = 7  # the target's media token id in these examples (any id the tokenizer has)


@pytest.fixture(scope="module")
def phi3_v(tmp_path_factory):
    sys.path.insert(0, str(PROBES))
    import _own_pipeline

    folder = build_source("phi3_v", tmp_path_factory.mktemp("phi3_v") / "src")
    facts = source_training_facts(folder)
    data = folder / "data" / "train.json"
    batches = _own_pipeline.own_batches(str(folder), str(data), facts, 2)
    yield _own_pipeline, folder, facts, data, batches
    sys.path.remove(str(PROBES))


def faithful(batch):
    """A target example as a faithful port writes it: the media run as the target's media token, aligned labels."""
    ids = [MEDIA if t < 0 else t for t in batch["input_ids"][0].tolist()]
    labels = batch["labels"][0].tolist()
    keep = int(batch["attention_mask"][0].sum())
    return {"input_ids": ids[:keep], "labels": labels[:keep]}


def parity(phi3_v, examples):
    mod, folder, facts, data, _ = phi3_v
    return mod.own_pipeline_parity(str(folder), str(data), examples, facts, MEDIA)


def test_a_faithful_port_passes(phi3_v):
    result = parity(phi3_v, [faithful(b) for _, b in phi3_v[4]])
    assert result["passed"], result["problems"]
    assert result["oracle"] == "the source's own training pipeline" and result["samples_compared"] == 2
    assert result["media_spans"] == result["source_media_spans"] == [[13], [13]]
    assert result["trained"] == result["source_trained"] > 0


def test_a_dropped_trained_newline_fails(phi3_v):
    mod, folder, *_ = phi3_v
    from transformers import AutoTokenizer

    newline = AutoTokenizer.from_pretrained(folder)("\n", add_special_tokens=False)["input_ids"][0]
    examples = [faithful(b) for _, b in phi3_v[4]]
    ex = examples[0]
    last = max(j for j, lab in enumerate(ex["labels"]) if lab == newline)  # the newline after <|end|>
    ex["labels"][last] = -100
    result = parity(phi3_v, examples)
    assert not result["passed"]
    assert any("sample 0: 1 position(s) the source's own pipeline trains and the target does not" in p
               and "'\\n'" in p for p in result["problems"]), result["problems"]
    # the failure names the file and the keys the oracle read
    assert "train.json" in result["problems"][-1] and "['image', 'id', 'question', 'answer']" in result["problems"][-1]


def test_labels_shifted_twice_fail(phi3_v):
    examples = [faithful(b) for _, b in phi3_v[4]]
    for ex in examples:  # a port that pre-shifts the labels although the target's loss shifts them again
        ex["labels"] = ex["labels"][1:] + [-100]
    result = parity(phi3_v, examples)
    assert not result["passed"]
    assert any("the target trains and the source's own pipeline does not" in p for p in result["problems"])


def test_a_media_span_of_another_length_fails(phi3_v):
    examples = [faithful(b) for _, b in phi3_v[4]]
    ex = examples[1]
    start = ex["input_ids"].index(MEDIA)
    ex["input_ids"].insert(start, MEDIA)
    ex["labels"].insert(start, -100)
    result = parity(phi3_v, examples)
    assert any("media spans differ" in p and "[14]" in p for p in result["problems"]), result["problems"]


def test_a_source_class_is_built_from_what_a_script_has_or_the_missing_parameter_is_named(phi3_v):
    mod, folder, facts, data, _ = phi3_v
    provided = mod.Provided(str(folder), str(data), True)
    module = mod.load_module(str(folder), facts["collator"]["file"])
    collator = mod.construct(module.Phi3VDataCollator, provided, "collator")  # its 'processor' filled by name
    assert type(collator.processor).__name__ == "Phi3VProcessor"

    def needs(a_mystery):
        return a_mystery
    with pytest.raises(TypeError, match="cannot build the source's collator needs: .*'a_mystery'"):
        mod.construct(needs, provided, "collator")
