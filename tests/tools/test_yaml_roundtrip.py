"""Round-trip editing of framework YAML (tools/yaml_roundtrip.py): an unedited document is written back byte for
byte; an edit changes its key only, keeping comments, anchors/aliases, order and indentation. ``check_edits`` is the
property the real checkout's examples are held to as well (tests/realmm/test_yaml_roundtrip_real.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import msmigrate.testbeds.standin as standin_pkg
from msmigrate.tools import yaml_roundtrip as rt
from msmigrate.tools import yaml_splice

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
    assert "    path: &P /data/model  # the weights\n    again: *P\n    kind: vl\n" in out
    assert "knob" not in out and "\n# training\ntraining:\n    lr: 1.0e-5\n    load: /data/model\n" in out
    assert "        apply_modules:  # order matters\n            - model.language_model\n" in out
    assert "    size: null\n\n# model\n" in out


def test_a_new_key_goes_last_before_the_next_sections_header():
    doc = rt.load(FOUR)
    rt.put(doc, doc["model"], "freeze", [])
    assert "    freeze: []\n\n# training\n" in rt.dump(doc)


def test_plain_copy_for_json():
    assert rt.plain(rt.load(FOUR))["model"] == {"path": "./ckpt", "again": "./ckpt", "kind": "vl", "knob": 1}


# layouts the framework's examples use that an emitter rewrites (written for this test, not copied from them): two
# indentations in one file, a dash one column right of its parent, Python-cased booleans, an unspaced flow sequence,
# two spaces after a colon, a comment after an alias, an anchored mapping merged into another
MIXED = """# mixed layouts in one file
features:
  memory_profile:
      enable: False
      ranks: [0,1,2,3]
  plan:
    apply_modules:
     - a.{*}
     - b.{*}
data:
  dataset_param: &TRAIN
    attr: &A
      images: images
    basic: &B
      batch: &MBS 2
      cutoff_len: 1024  # tokens
      seed: 1
  loader:
    batch_size: *MBS  # static only
  val_dataset_param:
    <<: *TRAIN
    basic:
      <<: *B
      cutoff_len: 512
training:
  lr:  1.0e-5
  save: ./out
  dtype: "bf16"

# last
other: 1
"""


def test_mixed_layouts_survive_edits_around_them():
    doc = rt.load(MIXED)
    assert rt.dump(rt.clone(doc)) == MIXED
    rt.put(doc, doc["features"]["memory_profile"], "enable", True)
    rt.put(doc, doc["features"]["memory_profile"], "ranks", [0, 1])
    rt.put(doc, doc["features"]["plan"], "apply_modules", ["x.{*}"])
    rt.put(doc, doc["data"]["dataset_param"]["basic"], "cutoff_len", 4096)
    rt.put_mapping(doc, doc["data"]["dataset_param"], "attr", {"images": "imgs", "videos": "vids"})
    rt.put(doc, doc["data"]["dataset_param"]["basic"], "seed", 2)  # merged by val_dataset_param.basic
    rt.remove(doc["training"], "save")
    rt.put(doc, doc["training"], "dtype", "fp32")
    rt.put(doc, doc["training"], "load", "/data/m")
    doc["features"]["memory_profile"]["new"] = {"a": 1}  # a plain assignment, not through put
    assert rt.dump(doc) == MIXED.replace(
        "      enable: False\n      ranks: [0,1,2,3]\n",
        "      enable: True\n      ranks: [0, 1]\n      new:\n        a: 1\n").replace(
        "     - a.{*}\n     - b.{*}\n", "     - x.{*}\n").replace(
        "      images: images\n", "      images: imgs\n      videos: vids\n").replace(
        "cutoff_len: 1024  # tokens\n      seed: 1", "cutoff_len: 4096  # tokens\n      seed: 2").replace(
        '  save: ./out\n  dtype: "bf16"\n', '  dtype: "fp32"\n  load: /data/m\n')
    # the merged section follows its anchor's edits without a text edit of its own
    val = rt.plain(yaml_splice.parse(rt.dump(doc)))["data"]["val_dataset_param"]
    assert val["attr"]["videos"] == "vids" and val["basic"]["seed"] == 2 and val["basic"]["cutoff_len"] == 512
    assert rt.plain(doc)["data"]["val_dataset_param"] == val


def test_an_edit_the_text_cannot_place_falls_back_to_the_whole_document():
    text = "items:\n  - name: a\n    size: 1\n"
    doc = rt.load(text)
    rt.remove(doc["items"][0], "name")  # the key shares its line with the list dash
    assert rt.dump(doc) == "items:\n  - size: 1\n"


def _leaves(node, out):
    """(mapping, key) of every one-line scalar reachable through block mappings, in document order (anchored ones
    and their aliases left out: an edit there changes the aliases' values as well, which MIXED's own test covers)."""
    for key, value in node.non_merged_items():
        if isinstance(value, dict):
            if not value.fa.flow_style():
                _leaves(value, out)
        elif isinstance(value, (bool, int, float, str)) and "\n" not in str(value) and not rt._anchor_name(value):
            out.append((node, key))
    return out


def _other(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    return f"{value}_edited"


def check_edits(text: str) -> None:
    """Unedited, ``text`` comes back byte for byte; with a few scalars changed and a key added, the output parses to
    the edited document and differs from ``text`` only in those lines."""
    doc = rt.load(text)
    assert rt.dump(rt.clone(doc)) == text
    leaves = _leaves(doc, [])
    edited = leaves[:: max(1, len(leaves) // 4)][:4]
    for mapping, key in edited:
        rt.put(doc, mapping, key, _other(mapping[key]))
    rt.put(doc, doc, "msmigrate_probe", {"added": True})
    out = rt.dump(doc)
    assert yaml_splice.same(yaml_splice.parse(out), doc)
    before, after = text.splitlines(), out.splitlines()
    assert len(after) == len(before) + 2
    changed = sum(a != b for a, b in zip(before, after[: len(before)]))
    assert changed <= len(edited) and after[len(before):] == ["msmigrate_probe:", "  added: true"] or \
        after[-2:] == ["msmigrate_probe:", "  added: true"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_edits_of_an_example_change_their_lines_only(path):
    check_edits(path.read_text(encoding="utf-8"))


def test_tricky_layouts_hold_the_edit_property():
    check_edits(MIXED)
