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
    mod, folder, facts, data, _ = phi3_v
    # without the plan's media id (no measured expansion), the target's is read where the source's run starts
    unknown = mod.own_pipeline_parity(str(folder), str(data), [faithful(b) for _, b in phi3_v[4]], facts, None)
    assert unknown["passed"] and unknown["media_token_id"] == MEDIA
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


ONE_DICT_SOURCE = {
    "modeling_tiny.py": "",
    "finetune/dataset.py": '''
import torch
from torch.utils.data import Dataset


class PairDataset(Dataset):
    def __init__(self, raw_data):
        self.raw_data = raw_data

    def __len__(self):
        return len(self.raw_data)

    def __getitem__(self, i):
        ids = torch.tensor(self.raw_data[i]["ids"])
        target = torch.full_like(ids, -100)
        for k in range(1, len(ids)):
            if k >= self.raw_data[i]["answer_from"]:
                target[k - 1] = ids[k]
        return {"input_ids": ids, "labels": target}


def data_collator(examples):
    return {"input_ids": torch.stack([e["input_ids"] for e in examples]),
            "labels": torch.stack([e["labels"] for e in examples])}
''',
    "finetune/trainer.py": '''
import torch
from transformers import Trainer


class TinyTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(data=inputs)
        logits = outputs.logits.view(-1, outputs.logits.shape[-1])
        loss = torch.nn.CrossEntropyLoss()(logits, labels.view(-1))
        return (loss, outputs) if return_outputs else loss
''',
}


def test_a_one_dict_source_with_its_own_loss_and_pre_shifted_labels(tmp_path):
    """The other contract kind: a forward taking one dict, the loss computed by the trainer on pre-shifted labels.
    Its own loss path is the reference (compute_loss run without a Trainer instance), and the plugin's batch gets
    the labels aligned: the plugin's shifted loss on them is the source's loss."""
    import json

    import torch

    sys.path.insert(0, str(PROBES))
    import _own_pipeline as mod

    for rel, text in ONE_DICT_SOURCE.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    data = tmp_path / "train.json"
    data.write_text(json.dumps([{"ids": [5, 6, 7, 8, 9], "answer_from": 3}]))
    facts = source_training_facts(tmp_path, {"signature": "forward(self, data, **kwargs)"})
    assert (facts["forward_call"], facts["label_convention"]) == ("one dict", "pre-shifted")
    [(_, batch)] = mod.own_batches(str(tmp_path), str(data), facts, 1)
    assert batch["labels"].tolist() == [[-100, -100, 8, 9, -100]]

    torch.manual_seed(0)
    table = torch.nn.Embedding(16, 16)

    class DictModel(torch.nn.Module):  # the source: forward(data) -> logits only
        def __init__(self):
            super().__init__()
            self.table = table

        def forward(self, data, **kwargs):
            return type("Out", (), {"logits": self.table(data["input_ids"])})()

    logits, loss = mod.own_forward(DictModel(), batch, facts, str(tmp_path))
    assert logits.shape == (1, 5, 16)
    aligned = mod.aligned_batch(batch, facts)
    assert aligned["labels"].tolist() == [[-100, -100, -100, 8, 9]]
    shifted = torch.nn.functional.cross_entropy(logits[0, :-1], aligned["labels"][0, 1:])  # the plugin's loss
    assert torch.allclose(loss, shifted)

    class Tok:
        def decode(self, ids):
            return " ".join(map(str, ids))

    ids = [5, 6, 7, 8, 9]
    port = mod.compare_with_target(Tok(), batch, {"input_ids": ids, "labels": aligned["labels"][0].tolist()},
                                   "pre-shifted", None)
    assert not port["problems"] and port["trained"] == port["source_trained"] == 2
    copied = mod.compare_with_target(Tok(), batch, {"input_ids": ids, "labels": batch["labels"][0].tolist()},
                                     "pre-shifted", None)  # the source's pre-shifted labels kept: shifted twice
    assert any("the target trains and the source's own pipeline does not" in p for p in copied["problems"])
    sys.path.remove(str(PROBES))


def test_g2s_record_and_summary_name_the_sources_own_pipeline(phi3_v):
    from msmigrate.agent.routes.fsdp2.gates.parity import data_parity_record, parity_summary

    result = parity(phi3_v, [faithful(b) for _, b in phi3_v[4]])
    problems, record = data_parity_record({"parity": result}, {"loss_labels": {"alignment": "aligned"}})
    assert not problems and record["status"] == "pass"
    assert record["keys_read"] == ["image", "id", "question", "answer"] and record["data_file"].endswith("train.json")
    line = parity_summary(record)
    assert line.startswith("pass against the source's own training pipeline: ids = source") and "media 26" in line
