"""The Megatron route's data parity on get_batch's batch (tools/megatron/probes/_batch_data_parity.py): a padded batch
row holding a recorded real example (real MindSpeed-MM's dataset output for the tiny llava testbed) is compared with
the source's own chat template + processor on the record it came from. Equal ids and labels pass (the answer's first
word cut differently at the template's slot boundary is the same text, recorded as such); one image token
missing from the media expansion fails naming the position and both tokens; a prompt token trained fails; a batch
without labels does not pass."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

import msmigrate

sys.path.insert(0, str(Path(msmigrate.__file__).parent / "tools" / "megatron" / "probes"))
import _batch_data_parity as bdp  # noqa: E402  (a probe module: runs in the target runtime, imported here by path)

torch = pytest.importorskip("torch")
RECORDED = Path(__file__).resolve().parents[2] / "data" / "real_batches" / "llava_real_examples.json"
IGNORE = -100
PAD = 3


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from msmigrate.testbeds.fixtures import build_source

    root = tmp_path_factory.mktemp("bdp")
    source = build_source("llava", root / "llava")
    target = root / "target"
    target.mkdir()
    doc = {"dataset_param": {"dataset_type": "huggingface", "basic_parameters": {
        "dataset": str(source / "data" / "train.json"), "dataset_dir": str(source / "data"), "template": "llava"},
        "attr": {"messages": "messages", "role_tag": "role", "content_tag": "content", "user_tag": "user",
                 "assistant_tag": "assistant", "images": "images"}}}
    (target / "data.json").write_text(json.dumps(doc))
    # the recorded examples were made with an efficient-eos template that doubled the closing </s>: the last id off
    examples = [{**e, "input_ids": e["input_ids"][:-1], "labels": e["labels"][:-1]}
                for e in json.loads(RECORDED.read_text())["examples"]]
    return source, target, examples


def _batch(example, pad=2):
    """One right-padded row as get_batch hands it (ids, labels, attention_mask)."""
    ids, labels = list(example["input_ids"]), list(example["labels"])
    return {"input_ids": torch.tensor([ids + [PAD] * pad]), "labels": torch.tensor([labels + [IGNORE] * pad]),
            "attention_mask": torch.tensor([[1] * len(ids) + [0] * pad])}


def _run(setup, example):
    source, target, _ = setup
    return bdp.batch_data_parity(_batch(example), str(source), str(target), "data.json")


def test_equal_row_passes_with_the_media_and_labels_compared(setup):
    _, _, examples = setup
    for k, example in enumerate(examples):
        r = _run(setup, example)
        assert r["passed"], r["problems"]
        # no record equals the row id for id (the slot boundary below), so all 16 of train.json were scanned and
        # the one sharing the longest prefix + suffix taken
        assert r["record"] == k and r["padding_removed"] == 2 and r["records_scanned"] == 16
        # the real dataset tokenizes ``ASSISTANT:`` and the answer apart: `` The`` is `` `` + ``The`` there, the
        # same text from there on (the ids before it are the source's, id for id)
        assert not r["full_match"] and r["same_text_retokenized_from"] == r["first_divergence"] == (38, 43)[k]
        assert r["media_tokens"] == r["source_media_tokens"] == 16 and r["media_token_id"] == 4
        assert r["trained"] == 13 and r["label_convention"] == "aligned"


def test_one_image_token_missing_fails_naming_the_position(setup):
    _, _, examples = setup
    short = copy.deepcopy(examples[0])
    at = short["input_ids"].index(4)
    del short["input_ids"][at], short["labels"][at]
    r = _run(setup, short)
    assert not r["passed"] and r["record"] == 0
    first = r["problems"][0]
    assert f"leave the source processor's at position {at + 15}" in first, first
    assert "the source has 4 " in first, first
    assert any("15 media tokens in the target's ids, the source processor makes 16" in p for p in r["problems"])


def test_a_trained_prompt_token_fails(setup):
    _, _, examples = setup
    leaky = copy.deepcopy(examples[0])
    leaky["labels"][2] = leaky["input_ids"][2]
    r = _run(setup, leaky)
    assert not r["passed"]
    assert any("trained tokens outside the assistant turns (first at 2" in p for p in r["problems"]), r["problems"]


def test_a_batch_without_labels_does_not_pass(setup):
    source, target, examples = setup
    batch = _batch(examples[0])
    del batch["labels"]
    r = bdp.batch_data_parity(batch, str(source), str(target), "data.json")
    assert not r["passed"] and "no 2-D input_ids + labels" in r["error"]
