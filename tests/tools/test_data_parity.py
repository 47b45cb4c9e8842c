"""Data parity (probes/_data_parity.py) against each source's own processor, on target examples built here: the
right one (what the source's own rendering trains on) must pass, and each way a data path goes wrong must fail —
an eos appended after an answer the template closes itself, a changed answer, a media run a tokenizer-only source
is compared through. The sources are real fixture folders; the oracle is their processor, never a table here."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from PIL import Image

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"
sys.path.insert(0, str(PROBES))  # the probe imports its sibling _processor, as it does in the target runtime
spec = importlib.util.spec_from_file_location("data_parity_probe", PROBES / "_data_parity.py")
dp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dp)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    from PIL import Image

    from msmigrate.testbeds.fixtures import build_source

    from _processor import load_processor

    root, cache = tmp_path_factory.mktemp("parity_src"), {}

    def get(name: str):
        if name not in cache:
            folder = build_source(name, root / name)
            custom = (json.loads((folder / "config.json").read_text())).get("auto_map") is not None
            proc = load_processor(str(folder), custom)[0]
            sample = json.loads((folder / "data" / "train.json").read_text())[0]
            images = [Image.open(folder / "data" / p).convert("RGB") for p in sample.get("images") or []]
            cache[name] = (folder, proc, sample, images)
        return cache[name]

    return get


def right_example(proc, sample, images):
    """The example a faithful pipeline makes: the source's own ids of the conversation, the prompt masked."""
    ids = dp.source_ids(proc, sample["messages"], images, False)
    prompt = len(dp.source_ids(proc, sample["messages"][:1], images, True))
    return {"input_ids": ids, "labels": [dp.IGNORE] * prompt + ids[prompt:]}


def media_id(folder):
    return dp.declared_media_id(str(folder))


def test_the_right_example_passes_and_a_doubled_eos_fails(source):
    folder, proc, sample, images = source("llava")  # the template closes every answer with </s>
    ex = right_example(proc, sample, images)
    assert dp.check_sample(proc, sample, images, ex, media_id(folder))["problems"] == []
    eos = proc.tokenizer.eos_token_id
    doubled = {"input_ids": ex["input_ids"] + [eos], "labels": ex["labels"] + [eos]}  # efficient_eos on top
    problems = dp.check_sample(proc, sample, images, doubled, media_id(folder))["problems"]
    assert any("goes on after the source's ends" in p for p in problems), problems


def test_a_changed_answer_token_fails(source):  # noqa: D103 (the answer check, with the end check beside it)
    folder, proc, sample, images = source("llava")
    ex = right_example(proc, sample, images)
    ids = list(ex["input_ids"])
    ids[-3] = ids[-4]
    problems = dp.check_sample(proc, sample, images, {"input_ids": ids, "labels": ex["labels"][:-3] + ids[-3:]},
                               media_id(folder))["problems"]
    assert any("do not cover the assistant's answer" in p for p in problems), problems


def test_one_closing_eos_is_allowed_where_the_source_leaves_the_answer_open(source):
    folder, proc, sample, images = source("glm4v")  # no end-of-turn token: the next header ends a turn
    ex = right_example(proc, sample, images)
    eos = proc.tokenizer.eos_token_id
    closed = {"input_ids": ex["input_ids"] + [eos], "labels": ex["labels"] + [eos]}
    assert dp.check_sample(proc, sample, images, closed, media_id(folder))["problems"] == []
    twice = {"input_ids": closed["input_ids"] + [eos], "labels": closed["labels"] + [eos]}
    assert dp.check_sample(proc, sample, images, twice, media_id(folder))["problems"]


def test_ids_the_processor_appends_to_any_text_are_not_part_of_the_prompt(source):
    folder, proc, sample, images = source("paligemma")  # its processor ends every text with "\n"
    prompt = dp.source_ids(proc, sample["messages"][:1], images, True)
    full = dp.source_ids(proc, sample["messages"], images, False)
    assert full[:len(prompt)] == prompt  # the prompt render is where the training sequence goes on
    raw = dp._call(proc, proc.apply_chat_template(dp._structured(sample["messages"][:1]), tokenize=False,
                                                  add_generation_prompt=True), images, {"add_special_tokens": False})
    assert raw[:-1] == prompt and proc.tokenizer.decode(raw[-1:]) == "\n"


def test_a_tokenizer_only_source_compares_each_media_run_as_its_placeholder(source):
    folder, proc, sample, images = source("patchlm")  # AutoProcessor is its tokenizer: no image processor
    assert getattr(proc, "image_processor", None) is None
    mid = media_id(folder)
    ex = right_example(proc, sample, images)
    assert ex["input_ids"].count(mid) == len(images)  # the source's own ids: one placeholder token per image
    at = ex["input_ids"].index(mid)
    expanded = {"input_ids": ex["input_ids"][:at] + [mid] * 16 + ex["input_ids"][at + 1:],
                "labels": ex["labels"][:at] + [dp.IGNORE] * 16 + ex["labels"][at + 1:]}
    collapsed, runs = dp.collapse_media_runs(expanded, mid)
    assert runs == [16] and collapsed == ex
    assert dp.check_sample(proc, sample, images, collapsed, mid)["problems"] == []
    # the gate still fails on a wrong text around the run
    bad, _ = dp.collapse_media_runs({"input_ids": expanded["input_ids"][:-2] + expanded["input_ids"][-1:],
                                     "labels": expanded["labels"][:-2] + expanded["labels"][-1:]}, mid)
    assert dp.check_sample(proc, sample, images, bad, mid)["problems"]


def test_special_tokens_the_template_writes_into_every_answer_do_not_close_it(source, tmp_path):
    """A template that writes ``<think></think>`` (added special tokens) into every answer and leaves the answer open
    (the next header ends the turn): one appended eos is still allowed. Before, any added special token in the last
    answer counted as the source closing it itself, and the right example failed with "an appended eos doubles it"."""
    import shutil

    from _processor import load_processor

    folder = tmp_path / "glm4v_think"
    shutil.copytree(source("glm4v")[0], folder)
    template = (folder / "chat_template.jinja").read_text()
    # the answer written after its header as <think></think> + content: only the assistant turn changes
    marker = "<|{{ message['role'] }}|>{{ '\\n' }}"
    assert marker in template
    template = template.replace(marker, marker + "{% if message['role'] == 'assistant' %}<think></think>{% endif %}")
    (folder / "chat_template.jinja").write_text(template)
    proc = load_processor(str(folder), False)[0]
    proc.tokenizer.add_special_tokens({"additional_special_tokens": ["<think>", "</think>"]})
    proc.chat_template = template
    sample = json.loads((folder / "data" / "train.json").read_text())[0]
    images = [Image.open(folder / "data" / p).convert("RGB") for p in sample.get("images") or []]
    ex = right_example(proc, sample, images)
    assert proc.tokenizer.convert_tokens_to_ids("<think>") in ex["input_ids"]  # the answer holds the special token
    eos = proc.tokenizer.eos_token_id
    closed = {"input_ids": ex["input_ids"] + [eos], "labels": ex["labels"] + [eos]}
    assert dp.check_sample(proc, sample, images, closed, media_id(folder))["problems"] == []
    assert dp.closed_by_template(proc, sample["messages"], images, ex["input_ids"], dp.source_ids) == 0
    # and a template that closes its answers is measured as such (LLaVA's </s>)
    folder, proc, sample, images = source("llava")
    ex = right_example(proc, sample, images)
    assert dp.closed_by_template(proc, sample["messages"], images, ex["input_ids"], dp.source_ids) >= 1
