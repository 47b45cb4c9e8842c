"""Round-trip editing of framework YAML (tools/yaml_roundtrip.py): an unedited document is written back byte for
byte; an edit changes its key only, keeping comments, anchors/aliases, order and indentation."""

from __future__ import annotations

from pathlib import Path

import pytest

import msmigrate.testbeds.standin as standin_pkg
from msmigrate.tools import yaml_roundtrip as rt

EXAMPLES = sorted((Path(standin_pkg.__file__).parent / "tree" / "examples").glob("*/*.yaml"))

FOUR = """# parallel
parallel:
    fsdp_plan:
        apply_modules:  # order matters
            - model.visual
    size: null

# model
model:
    path: &P ./ckpt  # the weights
    again: *P
    kind: vl
    knob: 1

# training
training:
    lr: 1.0e-5
"""


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_an_unedited_example_is_written_back_unchanged(path):
    text = path.read_text(encoding="utf-8")
    assert rt.dump(rt.clone(rt.load(text))) == text


def test_edits_keep_everything_else():
    doc = rt.clone(rt.load(FOUR))
    assert rt.dump(doc) == FOUR
    rt.put(doc, doc["model"], "path", "/data/model")
    rt.remove(doc["model"], "knob")  # the last key: the next section's header comment stays
    rt.put(doc, doc["training"], "load", "/data/model")
    rt.put_mapping(doc, doc["parallel"], "fsdp_plan", {"apply_modules": ["model.language_model"]})
    out = rt.dump(doc)
    assert "    path: &P /data/model # the weights\n    again: *P\n    kind: vl\n" in out
    assert "knob" not in out and "\n# training\ntraining:\n    lr: 1.0e-5\n    load: /data/model\n" in out
    assert "        apply_modules:  # order matters\n            - model.language_model\n" in out
    assert "    size: null\n\n# model\n" in out


def test_a_new_key_goes_last_before_the_next_sections_header():
    doc = rt.load(FOUR)
    rt.put(doc, doc["model"], "freeze", [])
    assert "    freeze: []\n\n# training\n" in rt.dump(doc)


def test_plain_copy_for_json():
    assert rt.plain(rt.load(FOUR))["model"] == {"path": "./ckpt", "again": "./ckpt", "kind": "vl", "knob": 1}
