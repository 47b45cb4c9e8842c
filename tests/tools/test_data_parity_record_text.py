"""Data parity's check of the records' own text (``probes/_data_parity.py: template_tokens_in_text``): a special
token of the source's tokenizer that the source's chat template writes itself, carried inside a turn's text (an
answer exported from serving logs with its end-of-turn token still attached), is rendered once more than the
conversation's frame holds and fails G2, naming the token; a clean record, and a special token the template never
writes (the data's own grounding markers), pass. The processor is the qwen2_vl fixture's, loaded as the probe loads
it; the faulted record is heldout5's own edit applied to the fixture's records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import msmigrate
from msmigrate.testbeds.faults import all_faults

sys.path.insert(0, str(Path(msmigrate.__file__).parent / "tools" / "probes"))
import _data_parity as dp  # noqa: E402  (a probe module: runs in the target runtime, imported here by path)
from _processor import load_processor  # noqa: E402


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    from msmigrate.testbeds.fixtures import build_source

    source = build_source("qwen2_vl", tmp_path_factory.mktemp("q") / "qwen2_vl")
    return load_processor(str(source), False)[0], (source / "data" / "train.json").read_text()


def test_a_clean_record_has_no_template_token_in_its_text(qwen):
    proc, text = qwen
    assert all(dp.template_tokens_in_text(proc, r["messages"]) == [] for r in json.loads(text))


def test_an_answer_carrying_the_templates_end_of_turn_token_is_named(qwen):
    proc, text = qwen
    (edit,) = {f.id: f for f in all_faults()}["h5-data-records-answers-keep-end-token"].edits
    faulted = json.loads(text.replace(edit.old, edit.new))
    hits = [(i, dp.template_tokens_in_text(proc, r["messages"])) for i, r in enumerate(faulted)]
    hit = [(i, p) for i, p in hits if p]
    assert hit and len(hit) == text.count(edit.old)
    (problem,) = hit[0][1]
    assert "'<|im_end|>'" in problem and "(assistant)" in problem and "strip it from the records" in problem


def test_a_special_token_the_template_never_writes_is_the_datas_own(qwen):
    proc, text = qwen
    record = json.loads(text)[0]["messages"]
    boxed = [*record[:-1], {**record[-1], "content": record[-1]["content"] + " <|endoftext|>"}]
    assert "<|endoftext|>" in dp._special_strings(proc.tokenizer)
    assert dp.template_tokens_in_text(proc, boxed) == []
    # the media placeholder is the dataset's marker, never counted as text
    assert dp.template_tokens_in_text(proc, [{**record[0], "content": "<image><image>" + record[0]["content"]},
                                             *record[1:]]) == []


def test_an_empty_answer_in_a_record_is_named_and_routed_to_the_data():
    from msmigrate.knowledge.classifier import classify

    messages = [{"role": "user", "content": "<image>Describe the image."}, {"role": "assistant", "content": " "}]
    (problem,) = dp.empty_answers(messages)
    assert problem.startswith("turn 1 (assistant): the record's answer is empty")
    assert classify(f"data parity: sample 3: {problem}").case_id == "records-empty-answer"
    assert dp.empty_answers([messages[0], {"role": "assistant", "content": "A grey square."}]) == []


def test_every_record_is_read_for_its_text_and_each_kind_is_one_line_with_its_count(qwen):
    proc, text = qwen
    records = json.loads(text)
    records[1]["messages"][-1]["content"] = ""
    records[3]["messages"][-1]["content"] = "  "
    problems, read = dp.record_text_problems(proc, records + ["not a record"])
    assert read == len(records)
    (problem,) = problems
    assert problem.startswith("sample 1: turn 1 (assistant): the record's answer is empty")
    assert problem.endswith("(and 1 more sample(s): 3)")


def test_answers_that_all_end_with_whitespace_are_one_line_routed_to_the_data(qwen):
    from msmigrate.knowledge.classifier import classify

    proc, text = qwen
    records = json.loads(text)
    assert dp.record_text_problems(proc, records)[0] == []
    for r in records:
        r["messages"][-1]["content"] += "\n"
    (problem,) = dp.record_text_problems(proc, records)[0]
    assert problem.startswith(f"every answer of the records ({len(records)} in {len(records)} sample(s)) ends with "
                              f"whitespace")
    verdict = classify(f"data parity: {problem}")
    assert (verdict.case_id, verdict.owner) == ("records-answers-trailing-whitespace", "data")
    # one answer that ends with a newline is that answer's own text
    records[0]["messages"][-1]["content"] = records[0]["messages"][-1]["content"].rstrip()
    assert dp.record_text_problems(proc, records)[0] == []
