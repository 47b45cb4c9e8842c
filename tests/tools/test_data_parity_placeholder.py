"""Data parity for a source whose processor does not expand media and whose template's image placeholder is not one
declared token (internvl_chat: AutoProcessor is a bare tokenizer, the template writes a literal ``<image>\\n``, the
config declares no image token): the source's text around each placeholder must be the target's ids id for id, the
target's span in its place is the media run (length, decoded form, media token read from it). The target examples
are built here the way the source's remote code builds its input (the placeholder replaced by ``<img>`` +
``<IMG_CONTEXT>`` x N + ``</img>``); each mutation a data path can make must still fail."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"
sys.path.insert(0, str(PROBES))
spec = importlib.util.spec_from_file_location("data_parity_probe_placeholder", PROBES / "_data_parity.py")
dp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dp)

RUN = "<img>" + "<IMG_CONTEXT>" * 4 + "</img>"


@pytest.fixture(scope="module")
def internvl(tmp_path_factory):
    from PIL import Image

    from msmigrate.testbeds.fixtures import build_source

    from _processor import load_processor

    folder = build_source("internvl_chat", tmp_path_factory.mktemp("parity_internvl") / "src")
    proc = load_processor(str(folder), True)[0]
    samples = json.loads((folder / "data" / "train.json").read_text())
    images = [[Image.open(folder / "data" / p).convert("RGB") for p in s.get("images") or []] for s in samples]
    return folder, proc, samples, images


def build(tok, messages, run=RUN, system=None, train_prompt=False, train_media=False):
    """A target example: the conversation rendered with the source template (string content, as a dataset plugin
    hands it), each ``<image>`` replaced by ``run``, the prompt masked."""
    msgs = ([{"role": "system", "content": system}] if system else []) + messages
    prompt = tok.apply_chat_template(msgs[:-1], tokenize=False, add_generation_prompt=True).replace("<image>", run)
    full = tok.apply_chat_template(msgs, tokenize=False).replace("<image>", run)
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    ids = tok(full, add_special_tokens=False)["input_ids"]
    labels = (list(ids) if train_prompt else [dp.IGNORE] * len(p) + ids[len(p):])
    if train_media:
        ctx = tok.convert_tokens_to_ids("<IMG_CONTEXT>")
        labels = [t if t == ctx else lab for t, lab in zip(ids, labels)]
    return {"input_ids": ids, "labels": labels}


def check(internvl, example, k=0):
    folder, proc, samples, images = internvl
    return dp.placeholder_parity(proc, str(folder), samples[k], images[k], example, dp.declared_media_id(str(folder)))


def test_the_remote_code_layout_passes_with_its_span_reported(internvl):
    folder, proc, samples, _ = internvl
    assert getattr(proc, "image_processor", None) is None and dp.declared_media_id(str(folder)) is None
    assert not dp.one_token_placeholder(proc, None)
    for k, sample in enumerate(samples[:2]):
        r = check(internvl, build(proc, sample["messages"]), k)
        assert r["problems"] == [], r["problems"]
        assert r["media_runs"] == [6] and r["media_spans"][0]["media_tokens"] == 4
        assert r["media_spans"][0]["decoded"] == RUN
        assert r["media_token"]["text"] == "<IMG_CONTEXT>" and "<IMG_CONTEXT>×4</img>" in r["decoded"]
        assert r["media_token"]["named_in_remote_code"] == ["modeling_internvl_chat.py"]
        assert r["placeholder"]["text"] == "<image>\n" and len(r["placeholder"]["source_ids"]) > 1
        assert r["trained"] > 0 and r["turns"] == 1


def test_a_wrong_system_turn_fails(internvl):
    _, proc, samples, _ = internvl
    r = check(internvl, build(proc, samples[0]["messages"], system="You are a pirate."))
    assert any("prompt ids differ" in p for p in r["problems"])


def test_wrong_role_markers_fail(internvl):
    _, proc, samples, _ = internvl
    ex = build(proc, samples[0]["messages"])
    text = proc.decode(ex["input_ids"], skip_special_tokens=False).replace("<|im_start|>user", "<|im_start|>human")
    ids = proc(text, add_special_tokens=False)["input_ids"]
    assert check(internvl, {"input_ids": ids, "labels": [dp.IGNORE] * (len(ids) - 13) + ids[-13:]})["problems"]


def test_a_changed_text_after_the_image_fails(internvl):
    _, proc, samples, _ = internvl
    msgs = [dict(m) for m in samples[0]["messages"]]
    msgs[0]["content"] = msgs[0]["content"].replace("Describe", "Explain")
    r = check(internvl, build(proc, msgs))
    assert any("text after image 1" in p for p in r["problems"]), r["problems"]


def test_trained_prompt_and_trained_media_fail(internvl):
    _, proc, samples, _ = internvl
    r = check(internvl, build(proc, samples[0]["messages"], train_prompt=True))
    assert any("outside the assistant turns" in p for p in r["problems"]), r["problems"]
    r = check(internvl, build(proc, samples[0]["messages"], train_media=True))
    assert any("media tokens are trained" in p for p in r["problems"]), r["problems"]


def test_shifted_labels_fail(internvl):
    _, proc, samples, _ = internvl
    ex = build(proc, samples[0]["messages"])
    ex["labels"] = ex["labels"][1:] + [dp.IGNORE]  # Megatron-style next-token labels on an answer
    r = check(internvl, ex)
    assert r["label_convention"] == "shifted"
    ex["labels"] = [lab if lab == dp.IGNORE else (lab + 1) % 500 for lab in build(proc, samples[0]["messages"])["labels"]]
    assert any("not the token the source has" in p for p in check(internvl, ex)["problems"])

