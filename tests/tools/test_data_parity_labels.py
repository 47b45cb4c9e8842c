"""Data parity reads the target's label convention from its labels (``probes/_data_parity.py``), on a batch recorded
from the real MindSpeed-MM: its huggingface dataset with an efficient-eos template gives labels aligned with the
input ids and an eos at position 0 (the turn-closing label that the loss's shift never uses). The same batch with
its labels pre-shifted by one (Megatron-style) must be detected as ``shifted`` and give the same counts; the label
mutations must be caught under either convention; and the gate must flag a convention the model's loss does not
share (read from the forward's logits)."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

import msmigrate
from msmigrate.agent.routes.fsdp2.gates.parity import data_parity_record, label_alignment_problems
from msmigrate.knowledge.classifier import classify

sys.path.insert(0, str(Path(msmigrate.__file__).parent / "tools" / "probes"))
import _data_parity as dp  # noqa: E402  (a probe module: runs in the target runtime, imported here by path)

RECORDED = Path(__file__).resolve().parents[1] / "data" / "real_batches" / "llava_real_examples.json"
IGNORE = -100


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    from msmigrate.testbeds.fixtures import build_source

    source = build_source("llava", tmp_path_factory.mktemp("llava") / "llava")
    examples = json.loads(RECORDED.read_text())["examples"]
    return source, examples


def _parity(source, examples):
    return dp.data_parity(str(source), str(source / "data" / "train.json"), examples, media_id=4)


def _shift(example):
    """The same example with Megatron-style labels: label i is the token at i+1."""
    out = copy.deepcopy(example)
    out["labels"] = example["labels"][1:] + [IGNORE]
    return out


def _undoubled(example):
    """The example without its last id: the recorded batch was made with the generated llava template of the
    time, efficient_eos on a template whose answers already close with ``</s>``, so the dataset's appended eos
    doubled it (the template is now registered without efficient_eos there)."""
    return {**example, "input_ids": example["input_ids"][:-1], "labels": example["labels"][:-1]}


def test_recorded_real_batch_shows_its_doubled_eos():
    examples = json.loads(RECORDED.read_text())["examples"]
    assert all(e["input_ids"][-1] == e["input_ids"][-3] == 1 for e in examples)  # `</s> </s>`


def test_recorded_real_batch_is_aligned_and_passes(llava):
    source, recorded = llava
    doubled = _parity(source, recorded)
    # one doubled-eos problem per sample, then the note naming what the oracle read (file and keys)
    *per_sample, note = doubled["problems"]
    assert not doubled["passed"] and len(per_sample) == 2
    assert all("an appended end doubles it" in p for p in per_sample)
    assert note.startswith(f"(the oracle read {source / 'data' / 'train.json'}: each record's 'messages' and 'images'")
    examples = [_undoubled(e) for e in recorded]
    assert examples[0]["labels"][0] == 1 != examples[0]["input_ids"][0]  # the efficient-eos label at position 0
    r = _parity(source, examples)
    assert r["passed"], r["problems"]
    assert r["label_convention"] == "aligned" and r["labels_unused_by_shift"] == 2
    assert [s["trained"] for s in r["per_sample"]] == [13, 13]
    assert r["trained"] + r["masked"] == r["tokens"] == 109 and r["media_tokens"] == r["source_media_tokens"] == 32
    # the prompt is not marked trained (label 0 is not a trained position), the answer and its eos are
    assert r["decoded_sample"].startswith("USER: <image>×16")
    assert "⟦The image shows a grey square on a white background.</s>" in r["decoded_sample"]


def test_shifted_convention_is_detected_with_the_same_counts(llava):
    source, recorded = llava
    examples = [_undoubled(e) for e in recorded]
    shifted = [_shift(e) for e in examples]
    conv, agree = dp.label_convention(shifted[0]["input_ids"], shifted[0]["labels"])
    assert conv == "shifted" and agree["shifted"] > agree["aligned"]
    r = _parity(source, shifted)
    assert r["passed"], r["problems"]
    assert r["label_convention"] == "shifted" and r["labels_unused_by_shift"] == 0
    assert [s["trained"] for s in r["per_sample"]] == [13, 13]
    assert r["decoded_sample"] == _parity(source, examples)["decoded_sample"]


def _train_prompt(example):
    out = copy.deepcopy(example)
    out["labels"] = [i if lab == IGNORE and i != 4 else lab for i, lab in zip(out["input_ids"], out["labels"])]
    return out


def _rewrite_answer(example):
    out = copy.deepcopy(example)
    j = next(j for j, lab in enumerate(out["labels"]) if j > 0 and lab != IGNORE)
    out["labels"][j] = out["labels"][j + 1]  # one answer token trained as its neighbour
    return out


def _off_by_two(example):
    out = copy.deepcopy(example)
    out["labels"] = example["labels"][2:] + [IGNORE, IGNORE]
    return out


@pytest.mark.parametrize("convention", ["aligned", "shifted"])
@pytest.mark.parametrize("mutate, expect", [
    (_train_prompt, "trained tokens outside the assistant turns"),
    (_rewrite_answer, "are not the token the source has"),
    (_off_by_two, "do not cover the assistant's answer"),
])
def test_label_mutations_are_caught_under_either_convention(llava, convention, mutate, expect):
    source, recorded = llava
    examples = [_undoubled(e) for e in recorded]
    base = examples if convention == "aligned" else [_shift(e) for e in examples]
    r = _parity(source, [mutate(e) for e in base])
    assert not r["passed"]
    assert any(expect in p for p in r["problems"]), r["problems"]
    verdict = [f"data parity: {p}" for p in r["problems"]]
    found = classify("\n".join(verdict), gate_verdict=verdict)
    assert (found.case_id, found.owner) == ("parity-labels-train-prompt", "data"), found


def test_gate_flags_labels_the_loss_shifts_a_second_time():
    assert label_alignment_problems("aligned", "aligned") == label_alignment_problems("shifted", "shifted") == []
    assert label_alignment_problems("shifted", None) == []  # the loss's reading unknown: no claim
    check = {"parity": {"label_convention": "shifted", "samples_compared": 2, "trained": 28, "problems": []}}
    problems, record = data_parity_record(check, {"loss_labels": {"alignment": "aligned"}})
    assert record["status"] == "fail" and record["loss_label_alignment"] == "aligned"
    assert problems == ["data parity: labels are shifted twice: the dataset's labels are already the next token "
                        "and the model's loss shifts them again (every position trains the token two ahead)"]
    found = classify(problems[0], gate_verdict=problems)
    assert found.case_id == "parity-labels-train-prompt"
    _, ok = data_parity_record({"parity": {**check["parity"], "label_convention": "aligned"}},
                               {"loss_labels": {"alignment": "aligned"}})
    assert ok["status"] == "pass"


def test_forward_reads_which_alignment_its_loss_takes():
    import importlib.util
    from types import SimpleNamespace

    import torch
    import torch.nn.functional as F

    spec = importlib.util.spec_from_file_location("forward_smoke_probe", dp.__file__.replace("_data_parity",
                                                                                          "forward_smoke"))
    fs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fs)
    torch.manual_seed(0)
    logits = torch.randn(2, 7, 11)
    labels = torch.randint(0, 11, (2, 7))
    labels[:, :3] = IGNORE
    shifting = F.cross_entropy(logits[:, :-1].reshape(-1, 11), labels[:, 1:].reshape(-1), ignore_index=IGNORE)
    plain = F.cross_entropy(logits.reshape(-1, 11), labels.reshape(-1), ignore_index=IGNORE)
    out = SimpleNamespace(logits=logits)
    assert fs.loss_labels(out, {"labels": labels}, float(shifting))["alignment"] == "aligned"
    assert fs.loss_labels(out, {"labels": labels}, float(plain))["alignment"] == "shifted"
    assert fs.loss_labels(out, {"labels": labels}, float(plain) + 1.0)["alignment"] is None
    assert fs.loss_labels(out, {"labels": labels[:, :5]}, float(plain))["alignment"] is None
    # a randomly initialised model: logits nearly uniform, so both recomputations land within 1e-4 of the loss
    # (measured on the real runtime's internvl: 6.2633 aligned vs 6.2628 shifted); the exact one is the reading
    flat = SimpleNamespace(logits=torch.randn(2, 7, 11) * 1e-4)
    near = {k: float(F.cross_entropy(x.reshape(-1, 11), y.reshape(-1), ignore_index=IGNORE)) for k, (x, y) in
            {"aligned": (flat.logits[:, :-1], labels[:, 1:]), "shifted": (flat.logits, labels)}.items()}
    assert 0 < abs(near["aligned"] - near["shifted"]) < 1e-4 * near["aligned"]
    assert fs.loss_labels(flat, {"labels": labels}, near["aligned"])["alignment"] == "aligned"
    assert fs.loss_labels(flat, {"labels": labels}, near["shifted"])["alignment"] == "shifted"
    # a loss half-way between the two is neither
    assert fs.loss_labels(flat, {"labels": labels}, (near["aligned"] + near["shifted"]) / 2)["alignment"] is None


def test_vision_feature_rows_of_the_return_shapes_seen():
    """What ``get_image_features`` returns across the two runtimes: a tensor, per-image tensors, a model output
    (transformers 5), and (per-image features, deepstack features per layer) from transformers 4.57's Qwen3-VL —
    the media tokens must be compared with the first only."""
    import importlib.util
    from types import SimpleNamespace

    import torch

    spec = importlib.util.spec_from_file_location("forward_smoke_rows", dp.__file__.replace("_data_parity",
                                                                                         "forward_smoke"))
    fs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fs)
    per_image = (torch.zeros(4, 8), torch.zeros(4, 8))
    assert fs.feature_rows(torch.zeros(8, 8), 8) == 8
    assert fs.feature_rows(per_image, 8) == 8
    assert fs.feature_rows(SimpleNamespace(pooler_output=per_image), 8) == 8
    assert fs.feature_rows((per_image, [torch.zeros(8, 8)]), 8) == 8
    assert fs.feature_rows(torch.zeros(8, 5), 8) is None


def test_media_token_of_a_span_with_one_context_token_takes_the_inner_id():
    """``<img><IMG_CONTEXT></img>`` (ids 3, 7, 4): every run is 1 long; the markers at the span's ends are not the
    media token (the first id used to win: G2 set id 3 for the caller-set rule in live run 7)."""
    ids = [1, 3, 7, 4, 9, 9, 3, 7, 4, 2]
    assert dp.media_token_of(ids, [(1, 4), (6, 9)]) == (7, None)
    # a longest run still wins outright, and a span of one id is that id
    assert dp.media_token_of([3, 7, 7, 7, 4], [(0, 5)]) == (7, None)
    assert dp.media_token_of([5, 8, 5], [(1, 2)]) == (8, None)
