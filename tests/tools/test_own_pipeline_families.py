"""G2's oracle on the two remote-code families added for issue 31, each through its OWN training code:

- qwen_vl_chat (Qwen-VL-Chat layout): finetune.py's dataset (no collator: the HF Trainer's default one stacks it),
  built with the max_len its tokenizer was saved with and the pad its script sets (``pad_token_id = eod_id``); it
  trains every turn's ``<|im_start|>``, ``<|im_end|>`` and the newline after it, and the answer. The image is named
  by the ids themselves (``<img>`` + path bytes + ``<imgpad>`` … ``</img>``): no media run to collapse, the ids compare
  one for one.
- deepseek_vl_v2 (DeepSeek-VL2 layout): finetune/dataset.py's dataset + collator (its processor's process_one and
  batchify); the media positions are the batch's own ``images_seq_mask`` (27 per sample image: global view + view
  separator + 2x2 tiles); the answer and the eos train.

A faithful port passes; each deviation from the source's training code fails with what differs: a trained newline
or closing token dropped, labels shifted twice, a media span of another length."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from msmigrate.testbeds.fixtures import build_source
from msmigrate.tools.repo_reader.training_facts import contract_text, source_training_facts

PROBES = Path(__file__).resolve().parents[2] / "msmigrate" / "tools" / "probes"
MEDIA = 7  # the target's media token id in the DeepSeek examples (any id the tokenizer has)


def _setup(name, root):
    sys.path.insert(0, str(PROBES))
    import _own_pipeline

    folder = build_source(name, root / name)
    facts = source_training_facts(folder)
    data = folder / "data" / "train.json"
    return _own_pipeline, folder, facts, data, _own_pipeline.own_batches(str(folder), str(data), facts, 2)


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    yield _setup("qwen_vl_chat", tmp_path_factory.mktemp("qwen"))
    sys.path.remove(str(PROBES))


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory):
    yield _setup("deepseek_vl_v2", tmp_path_factory.mktemp("deepseek"))
    sys.path.remove(str(PROBES))


def faithful(batch, media=None):
    """A target example as a faithful port writes it: the same text ids (media positions as the target's media
    token where the source marks them), aligned labels, no padding."""
    ids = batch["input_ids"][0].tolist()
    if media is not None:
        ids = [media if m else t for t, m in zip(ids, batch["images_seq_mask"][0].tolist())]
    keep = int(batch["attention_mask"][0].sum())
    return {"input_ids": ids[:keep], "labels": batch["labels"][0].tolist()[:keep]}


def parity(setup, examples, media=None):
    mod, folder, facts, data, _ = setup
    return mod.own_pipeline_parity(str(folder), str(data), examples, facts, media)


def _id(folder, text):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, trust_remote_code=True)(text, add_special_tokens=False)["input_ids"]


# --- Qwen-VL-Chat ------------------------------------------------------------------------------------------------

def test_qwen_vl_the_contract_read_from_its_finetune_script(qwen):
    _, folder, facts, _, batches = qwen
    assert facts["kind"] == "own" and facts["entry"] == ["finetune.py"] and facts["trainer"] is None
    assert facts["collator"] is None and facts["dataset"]["file"] == "finetune.py"
    assert {"conversations", "from", "value"} <= set(facts["data_keys"])
    assert facts["label_convention"] == "aligned" and "modeling_qwen.py" in facts["label_evidence"]
    assert facts["loss_at"].startswith("the model's forward")
    assert [s["text"] for s in facts["tokenizer_setup"]] == ["tokenizer.pad_token_id = tokenizer.eod_id"]
    text = "\n".join(contract_text(facts))
    assert "tokenizer.pad_token_id = tokenizer.eod_id" in text and "IGNORE_TOKEN_ID" in text
    # padded to the tokenizer's max_len (512) by the script itself; attention_mask = ids != pad
    batch = batches[0][1]
    assert batch["input_ids"].shape == (1, 512) and int(batch["attention_mask"].sum()) < 512


def test_qwen_vl_a_faithful_port_passes(qwen):
    result = parity(qwen, [faithful(b) for _, b in qwen[4]])
    assert result["passed"], result["problems"]
    assert result["samples_compared"] == 2 and result["trained"] == result["source_trained"] == 2 * 19


def test_qwen_vl_a_dropped_trained_user_turn_newline_fails(qwen):
    """The source trains the newline after every ``<|im_end|>``, the user turn's too (a pipeline built from the
    chat template would not): a port that leaves it out fails, naming the position and the token."""
    _, folder, *_ = qwen
    newline, im_end = _id(folder, "\n")[0], _id(folder, "<|im_end|>")[0]
    examples = [faithful(b) for _, b in qwen[4]]
    ex = examples[0]
    user_end = [j for j, t in enumerate(ex["input_ids"]) if t == im_end][1]  # 0: system, 1: user, 2: assistant
    assert ex["labels"][user_end + 1] == newline
    ex["labels"][user_end + 1] = -100
    result = parity(qwen, examples)
    assert not result["passed"]
    assert any("sample 0: 1 position(s) the source's own pipeline trains and the target does not" in p
               and "'\\n'" in p for p in result["problems"]), result["problems"]
    assert "train.json" in result["problems"][-1] and "conversations" in result["problems"][-1]


def test_qwen_vl_labels_shifted_twice_fail(qwen):
    examples = [faithful(b) for _, b in qwen[4]]
    for ex in examples:
        ex["labels"] = ex["labels"][1:] + [-100]
    result = parity(qwen, examples)
    assert not result["passed"]
    assert any("the target trains and the source's own pipeline does not" in p for p in result["problems"])


def test_qwen_vl_an_image_span_of_another_length_fails(qwen):
    _, folder, *_ = qwen
    pad = _id(folder, "<imgpad>")[0]
    examples = [faithful(b) for _, b in qwen[4]]
    ex = examples[1]
    at = ex["input_ids"].index(pad)
    del ex["input_ids"][at], ex["labels"][at]  # 255 ids between <img> and </img>: the model's 256 features misfit
    result = parity(qwen, examples)
    assert any("sample 1: input ids differ" in p for p in result["problems"]), result["problems"]


# --- DeepSeek-VL2 ------------------------------------------------------------------------------------------------

def test_deepseek_vl2_the_contract_read_from_its_training_code(deepseek):
    _, _, facts, _, batches = deepseek
    assert facts["entry"] == ["finetune/dataset.py", "finetune/train.py"]
    assert facts["trainer"]["class"] == "VLTrainer" and facts["trainer"]["computes_loss"] is True
    assert facts["loss_at"] == "finetune/train.py:17 VLTrainer.compute_loss" and facts["forward_call"] == "kwargs"
    assert facts["label_convention"] == "aligned" and "shifts logits" in facts["label_evidence"]
    assert facts["dataset"]["class"] == "ConversationDataset" and facts["collator"]["name"] == "VLCollator"
    assert facts["data_keys"] == ["conversation", "images"]
    # the dataset only calls the processor: its masking is read from the processor's code
    assert any(line.startswith("processing_deepseek_vl_v2.py:") and "mask_prompt" in line for line in facts["masking"])
    assert set(batches[0][1]) == {"input_ids", "labels", "attention_mask", "images", "images_seq_mask",
                                  "images_spatial_crop"}


def test_deepseek_vl2_a_faithful_port_passes(deepseek):
    mod, folder, facts, data, batches = deepseek
    result = parity(deepseek, [faithful(b, MEDIA) for _, b in batches], MEDIA)
    assert result["passed"], result["problems"]
    assert result["media_spans"] == result["source_media_spans"] == [[27], [27]]
    # without the plan's media id, the target's is read where the source's sequence mask starts
    unknown = parity(deepseek, [faithful(b, MEDIA) for _, b in batches], None)
    assert unknown["passed"] and unknown["media_token_id"] == MEDIA


def test_deepseek_vl2_a_dropped_closing_token_fails(deepseek):
    _, folder, *_ = deepseek
    from transformers import AutoTokenizer

    eos = AutoTokenizer.from_pretrained(folder).eos_token_id
    examples = [faithful(b, MEDIA) for _, b in deepseek[4]]
    ex = examples[0]
    last = max(j for j, lab in enumerate(ex["labels"]) if lab == eos)
    ex["labels"][last] = -100
    result = parity(deepseek, examples, MEDIA)
    assert any("sample 0: 1 position(s) the source's own pipeline trains and the target does not" in p
               for p in result["problems"]), result["problems"]


def test_deepseek_vl2_labels_shifted_twice_fail(deepseek):
    examples = [faithful(b, MEDIA) for _, b in deepseek[4]]
    for ex in examples:
        ex["labels"] = ex["labels"][1:] + [-100]
    result = parity(deepseek, examples, MEDIA)
    assert any("the target trains and the source's own pipeline does not" in p for p in result["problems"])


def test_deepseek_vl2_a_media_span_without_the_tiles_fails(deepseek):
    """A port that writes only the global view's tokens (6 + separator), not the 2x2 tiles' 20."""
    examples = [faithful(b, MEDIA) for _, b in deepseek[4]]
    ex = examples[1]
    start = ex["input_ids"].index(MEDIA)
    del ex["input_ids"][start + 7:start + 27], ex["labels"][start + 7:start + 27]
    result = parity(deepseek, examples, MEDIA)
    assert any("media spans differ" in p and "[7]" in p for p in result["problems"]), result["problems"]


@pytest.mark.parametrize("name", ["qwen_vl_chat", "deepseek_vl_v2"])
def test_the_plans_measured_contract_names_what_the_own_pipeline_writes(name, qwen, deepseek, tmp_path):
    """The plan's measured facts (probe own_pipeline_facts): the trained stretches, the media runs and what sits in
    them, and the tag tokens the source's own pipeline writes — measured, not the tokenizer's name-matched list
    (DeepSeek's ``<|ref|>`` is a media-named token its pipeline never writes; Qwen-VL's image tags are no added
    tokens of its tokenizer at all)."""
    from msmigrate.tools.repo_reader.training_facts import measure_own_pipeline

    _, folder, facts, data, _ = {"qwen_vl_chat": qwen, "deepseek_vl_v2": deepseek}[name]
    measured = measure_own_pipeline(sys.executable, folder, data, facts, tmp_path / "run")
    first = measured["records"][0]
    if name == "qwen_vl_chat":
        assert first["tags_written"] == ["<|im_start|>", "<|im_end|>", "<img>", "<imgpad>", "</img>"]
        assert first["trained_text"] == ["<|im_end|>\n<|im_start|>", "<|im_end|>\n<|im_start|>",
                                         "The image shows a grey square on a white background.<|im_end|>\n"]
        assert first["media_runs"] == []  # the ids name the image: no sequence mask, no negative ids
    else:
        assert first["tags_written"] == ["<｜begin▁of▁sentence｜>", "<|User|>", "<image>", "<|Assistant|>",
                                         "<｜end▁of▁sentence｜>"]
        assert first["media_runs"] == [27] and first["at_media"] == ["<image>"]
        assert first["trained_text"] == ["The image shows a grey square on a white background.<｜end▁of▁sentence｜>"]
    line = contract_text({**facts, "measured": measured})
    assert any("the tag tokens it writes" in x for x in line)
