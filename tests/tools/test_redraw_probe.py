"""G2's second draw (tools/probes/_redraw.py): a sample collated once must read the same from the dataset afterwards.
The real MindSpeed-MM collator pops each feature's media and rebinds the first feature's input_ids when a batch has no
image (a blank fake image's tokens appended); the real trainer's iterator cycles the dataloader. A dataset that hands
out the dicts it stores (internvl_chat's adapted play on the real framework) then trains its first epoch and fails
the second: ``8 <IMG_CONTEXT> tokens in input_ids but 4 image feature rows`` in G4's 20-step training parity, which
draws 20 of 16 samples, and at step 17 of a 20-step launch. The collator below behaves as the real one does (written
from its documented behaviour, not copied)."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest
import torch

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"
sys.path.insert(0, str(PROBES))
spec = importlib.util.spec_from_file_location("redraw_probe", PROBES / "_redraw.py")
redraw = importlib.util.module_from_spec(spec)
spec.loader.exec_module(redraw)
from _batch_parity import defined_at  # noqa: E402

FAKE = [7, 7, 7, 7]  # a blank fake image's tokens


class PoppingCollator:
    """Pops media off the features it is handed; a batch without any image gets a fake one's tokens appended to its
    first feature (rebinding its input_ids), as the real multimodal collator does."""

    def __call__(self, features):
        images = []
        for f in features:
            images += f.pop("images", None) or []
            f.pop("videos", None)
        if not images:
            features[0]["input_ids"] = features[0]["input_ids"] + FAKE
            images = ["fake"]
        width = max(len(f["input_ids"]) for f in features)
        return {"input_ids": torch.tensor([f["input_ids"] + [0] * (width - len(f["input_ids"])) for f in features]),
                "images": len(images)}


class StoredDataset(list):
    """Hands out the dicts it keeps (the play's ListDataset before the adaptation)."""


class FreshDataset(list):
    """A new dict per draw, as the framework's own datasets build them (the adaptation: a copy)."""

    def __getitem__(self, idx):
        return dict(super().__getitem__(idx))


class AugmentingDataset(FreshDataset):
    """A new dict per draw with a random crop offset and random pixels: not repeatable by design."""

    def __getitem__(self, idx):
        return {**super().__getitem__(idx), "crop": random.random(), "pixels": torch.rand(3, 4, 4)}


def samples(n=3):
    return [{"input_ids": [1, 5, 5, 5, 5, 2], "labels": [-100, -100, -100, -100, -100, 2],
             "images": [f"images/sample_{i:02d}.png"], "videos": None} for i in range(n)]


def test_a_dataset_that_hands_out_its_stored_samples_is_named_with_what_the_collation_changed():
    dataset = StoredDataset(samples())
    batch, before, record = redraw.redraw_check(dataset, [0, 1], PoppingCollator(), defined_at)
    assert batch["images"] == 2 and record["samples"] == 2
    assert [c["sample"] for c in record["changed"]] == [0, 1]
    assert record["changed"][0]["change"] == "keys gone: images, videos"
    [problem] = record["problems"]
    assert "sample 0 read from the dataset again after its batch was collated" in problem
    assert "StoredDataset (defined in " in problem and "PoppingCollator (defined in " in problem
    assert "cyclic" in problem and "__getitem__" in problem
    # the other G2 checks read the samples as they were before the collation, media included
    assert [b["images"] for b in before] == [["images/sample_00.png"], ["images/sample_01.png"]]
    # what the second epoch then collates: the sample's own image tokens and a fake image's, one image
    again, _, second = redraw.redraw_check(dataset, [0], PoppingCollator(), defined_at)
    assert again["input_ids"][0].tolist() == [1, 5, 5, 5, 5, 2] + FAKE and again["images"] == 1
    assert second["changed"][0]["change"] == "input_ids changed (6 → 10 items)"


def test_fresh_samples_per_draw_pass_and_keep_the_trainers_order_of_events():
    dataset = FreshDataset(samples())
    batch, before, record = redraw.redraw_check(dataset, [0, 1, 2], PoppingCollator(), defined_at)
    assert record == {"samples": 3, "changed": [], "unstable_keys": [], "problems": []}
    assert batch["images"] == 3 and batch["input_ids"].shape == (3, 6)
    assert before == samples()


def test_a_random_augmentation_is_not_a_change():
    batch, _, record = redraw.redraw_check(AugmentingDataset(samples()), [0, 1], PoppingCollator(), defined_at)
    assert record["problems"] == [] and record["unstable_keys"] == ["crop"]  # pixels: same shape, floats not read
    assert batch["images"] == 2


@pytest.mark.parametrize("value,other", [([1, 2], [1, 2, 3]), (torch.tensor([1, 2]), torch.tensor([1, 3])),
                                         ({"a": [1]}, {"a": [2]}), ("x.png", "y.png"), (None, [])])
def test_fingerprints_tell_what_a_collator_can_change(value, other):
    assert redraw.fingerprint(value) != redraw.fingerprint(other)
    assert redraw.fingerprint(value) == redraw.fingerprint(value)
