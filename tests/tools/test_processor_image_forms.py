"""Processors take one prompt's images flat or one list per prompt; the probes call every source processor through
``_processor.call_with_images``, which asks the flat form first and the nested one where the processor refuses it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"


@pytest.fixture
def probes(monkeypatch):
    monkeypatch.syspath_prepend(str(PROBES))  # the probes import their siblings as the runtime runs them
    for name in ("_processor", "media_expansion"):
        sys.modules.pop(name, None)
    import _processor
    import media_expansion

    return _processor, media_expansion


class ListsPerPrompt:
    """A processor that, like Idefics', counts image lists against prompts: each prompt's images come as one list.
    Each image is written as 3 ids (open, patch, close) where the prompt says <image>."""

    def __call__(self, text, images=None, **kwargs):
        if images is not None and len(images) != len(text):
            raise ValueError("the number of text prompts should be the same as the number of image lists")
        ids = []
        for prompt, own in zip(text, images or [[]] * len(text)):
            if not isinstance(own, list):
                raise TypeError("each prompt's images must be a list")
            row, k = [1], 0
            for part in prompt.split("<image>")[:-1]:
                row += [5] * len(part) + [7, 8, 9]
                k += 1
            row += [5] * len(prompt.split("<image>")[-1])
            assert k == len(own)
            ids.append(row)
        return {"input_ids": ids}


class Flat:
    """A processor that takes the images of all prompts in one flat list (most do)."""

    def __call__(self, text, images=None, **kwargs):
        if images and any(isinstance(i, list) for i in images):
            raise ValueError("nested image lists are not accepted")
        return {"input_ids": [[1] + [7, 8, 9] * len(images or [])]}


def test_a_processor_that_wants_one_image_list_per_prompt_is_given_one(probes):
    proc_mod, _ = probes
    out = proc_mod.call_with_images(ListsPerPrompt(), "<image><image>hi", ["a", "b"])
    assert out["input_ids"] == [[1, 7, 8, 9, 7, 8, 9, 5, 5]]
    assert proc_mod.call_with_images(Flat(), "<image><image>", ["a", "b"])["input_ids"] == [[1, 7, 8, 9, 7, 8, 9]]


def test_where_both_forms_are_refused_the_flat_forms_error_is_raised(probes):
    proc_mod, _ = probes

    class Neither:
        def __call__(self, text, images=None, **kwargs):
            raise ValueError("nested" if isinstance(images[0], list) else "flat refused")

    with pytest.raises(ValueError, match="flat refused"):
        proc_mod.call_with_images(Neither(), "<image>", ["a"])


def test_the_two_image_expansion_is_measured_on_a_lists_per_prompt_processor(probes):
    """Before: ``one_expansion`` passed two flat images and the processor refused them; the sweep's idefics source
    was declined at the model phase for a call form of the probe's own."""
    _, me = probes
    exp, pre, post, _ = me.one_expansion(ListsPerPrompt(), "<image>", "img")
    assert (exp, pre, post) == ([7, 8, 9], 1, 0)


class PlacesImagesItself:
    """Like Idefics' image-text call: a prompt's flat images (one per prompt) go before its text, nested ones after
    it, each as 3 ids (open, patch, close); an ``<image>`` in the text stays one literal id (6)."""

    class Tok:
        def __call__(self, text):
            return {"input_ids": [[1] + [i for t in text for i in PlacesImagesItself.text_ids(t)]]}

    tokenizer = Tok()

    @staticmethod
    def text_ids(text):
        return [6 if c == "\0" else 5 for c in text.replace("<image>", "\0")]

    def __call__(self, text, images=None, **kwargs):
        if images and not isinstance(images[0], list):
            if len(images) != len(text):
                raise ValueError("as many prompts as images")
            return {"input_ids": [[1, 7, 8, 9] + self.text_ids(t) for t in text]}
        return {"input_ids": [[1] + self.text_ids(t) + [7, 8, 9] * len(own) for t, own in zip(text, images)]}


def test_a_processor_that_places_images_itself_is_declined_with_that_reason(probes):
    """The sweep's idefics: no per-image expansion of the placeholder exists (the one-image call puts the image
    before the text, the two-image call after it, the placeholder stays a literal id), and the failure says so."""
    _, me = probes
    with pytest.raises(ValueError, match="not the one-image expansion repeated .*places its images itself"):
        me.one_expansion(PlacesImagesItself(), "<image>", "img")


class ExpandsPlaceholder(PlacesImagesItself):
    """Writes an image's 3 ids where the text says <image>, and nothing for a text without one."""

    def __call__(self, text, images=None, **kwargs):
        return {"input_ids": [[1] + [i for c in t.replace("<image>", "\0") for i in ([7, 8, 9] if c == "\0" else [5])]
                              for t in text]}


def test_the_reason_names_no_self_placement_for_a_processor_that_expands_the_placeholder(probes):
    _, me = probes
    assert me.placed_without_placeholder(ExpandsPlaceholder(), "img") == ""
    assert me.one_expansion(ExpandsPlaceholder(), "<image>", "img")[:3] == ([7, 8, 9], 1, 0)


class WritesOwnPrompt(ExpandsPlaceholder):
    """Like ShieldGemma 2's processor: the text it is given is dropped; each image gets a fixed prompt of its own,
    one row per image (so a second image adds a row, not ids)."""

    def __call__(self, text, images=None, **kwargs):
        return {"input_ids": [[1, 7, 8, 9, 5, 5] for _ in images or [None]]}


def test_a_processor_that_ignores_the_text_is_declined_with_that_reason(probes):
    """The sweep's shieldgemma2 was declined with "a second image added 0 ids" and no why."""
    _, me = probes
    with pytest.raises(ValueError, match="added 0 ids .*do not change with the text"):
        me.one_expansion(WritesOwnPrompt(), "<image>", "img")
    assert me.ignores_the_text(ExpandsPlaceholder(), "<image>", "img") == ""


def test_the_processor_is_asked_for_tensors_as_a_training_pipeline_asks(probes):
    """A processor whose own expansion reads its image outputs as tensors (ovis2's ``grids[i].tolist()``) fails
    when called for lists; before, the media-expansion probe called it so and the sweep's ovis2 source was
    declined at the model phase for the probe's call form ("'list' object has no attribute 'tolist'")."""
    import torch

    proc_mod, me = probes

    class TensorsOnly:
        def __call__(self, text, images=None, return_tensors=None, **kwargs):
            grids = torch.tensor([[1, 2]] * len(images or []))
            if return_tensors != "pt":
                grids = grids.tolist()
            row = [1]
            for part in text[0].split("<image>")[:-1]:
                row += [5] * len(part) + [7] * int(torch.as_tensor(grids[0]).prod()) + [9] if images else []
                grids = grids[1:]
            ids = torch.tensor([row]) if return_tensors == "pt" else [row]
            return {"input_ids": ids, "grids": grids}

    assert proc_mod.call_with_images(TensorsOnly(), "<image>", ["a"])["input_ids"].tolist() == [[1, 7, 7, 9]]
    exp, pre, post, _ = me.one_expansion(TensorsOnly(), "<image>", "img")
    assert (exp, pre, post) == ([7, 7, 9], 1, 0)


def test_a_bare_tokenizer_gets_the_text_alone(probes):
    """A source with no processor class is rendered by its tokenizer, which takes no images: transformers 4.57's fast
    tokenizer raises TypeError on an ``images`` keyword (patchlm's data parity on the real runtime), 5.x ignores it."""
    from msmigrate.testbeds.fixtures.tokenizer import build_tokenizer

    _processor, _ = probes
    tok = build_tokenizer(["<|image|>"], bos=None, eos="<|end|>", pad="<|endoftext|>")

    class StrictTokenizer(type(tok)):  # 4.x: every keyword reaches _batch_encode_plus, which has no `images`
        def __call__(self, *args, **kwargs):
            if "images" in kwargs:
                raise TypeError("_batch_encode_plus() got an unexpected keyword argument 'images'")
            return super().__call__(*args, **kwargs)

    tok.__class__ = StrictTokenizer
    want = tok(text=["a <|image|> b"])["input_ids"]
    assert _processor.call_with_images(tok, "a <|image|> b", ["IMG"])["input_ids"] == want
    assert _processor.call_with_images(tok, "a <|image|> b", [])["input_ids"] == want
