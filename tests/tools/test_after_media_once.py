"""``after_media_once`` (probes/media_expansion.py) tells ids a processor writes once after the media whatever the
text holds (PaliGemma's ``<bos>`` between the images and the prompt: given one, it writes a second) from ids it adds
only where the text lacks them (a processor that puts the media first and adds a missing bos to the text). The
second was read as the first: the generated mm_plugin then wrote a bos after the media that the rendered
conversation already holds. Both processors here wrap PaliGemma's real processor and tokenizer (fixture folder)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"


@pytest.fixture(scope="module")
def probe_and_proc(tmp_path_factory):
    from msmigrate.testbeds.fixtures import build_source

    folder = build_source("paligemma", tmp_path_factory.mktemp("pal") / "paligemma")
    sys.path.insert(0, str(PROBES))
    try:
        for name in ("_processor", "media_expansion"):
            sys.modules.pop(name, None)
        import media_expansion
        from _processor import load_processor
    finally:
        sys.path.remove(str(PROBES))
    return media_expansion, load_processor(str(folder), False)[0]


class AddsBosWhenMissing:
    """The media first (as PaliGemma's processor puts it), then the text tokenized with a bos only where the text
    does not already start with one."""

    def __init__(self, real):
        self.tokenizer, self.real = real.tokenizer, real

    def __call__(self, text, images=None, **kw):
        tok, image = self.tokenizer, self.real.image_token
        body = text[0].replace(image, "")
        n = text[0].count(image)
        ids = tok.convert_tokens_to_ids([image]) * 4 * n
        if not body.startswith(tok.bos_token):
            ids = ids + [tok.bos_token_id]
        return {"input_ids": [ids + tok.encode(body, add_special_tokens=False)]}


def test_a_bos_added_only_when_missing_is_not_an_after_media_fact(probe_and_proc):
    from PIL import Image

    me, proc = probe_and_proc
    image = Image.new("RGB", (64, 64))
    wrapped = AddsBosWhenMissing(proc)
    exp, pre, _, _ = me.one_expansion(wrapped, proc.image_token, image)
    once, why = me.after_media_once(wrapped, proc.image_token, image, exp, pre)
    assert once is None and "when missing" in why, (once, why)
    # the real PaliGemma processor writes it whatever the text holds: that stays a fact of the media
    exp, pre, _, _ = me.one_expansion(proc, proc.image_token, image)
    once, _ = me.after_media_once(proc, proc.image_token, image, exp, pre)
    assert once and once["text"] == "<bos>" and once["where"] == "last"


class SeparatesWordAfterMedia:
    """The media where the placeholder stands, and a space written between the media and a word right after it,
    only where the text has no whitespace there (how Idefics2's processor rewrites ``<boundary>Describe``)."""

    def __init__(self, real):
        self.tokenizer, self.real = real.tokenizer, real

    def __call__(self, text, images=None, **kw):
        import re

        tok, image = self.tokenizer, self.real.image_token
        media = image * 4
        rewritten = re.sub(rf"{re.escape(image)}(?=[^\s<])", image + " ", text[0].replace(image, media))
        return {"input_ids": [tok.encode(rewritten, add_special_tokens=False)]}


def test_a_separator_written_before_a_word_after_the_media_is_measured(probe_and_proc):
    from PIL import Image

    me, proc = probe_and_proc
    image = Image.new("RGB", (64, 64))
    wrapped = SeparatesWordAfterMedia(proc)
    exp, pre, _, _ = me.one_expansion(wrapped, proc.image_token, image)
    sep, why = me.separator_after_media(wrapped, proc.image_token, image, exp, pre)
    assert sep and sep["text"].strip() == "" and sep["text"], (sep, why)
    # a bos added to the text where missing, with the media moved first, is no separator of the media
    wrapped = AddsBosWhenMissing(proc)
    exp, pre, _, _ = me.one_expansion(wrapped, proc.image_token, image)
    sep, why = me.separator_after_media(wrapped, proc.image_token, image, exp, pre)
    assert sep is None and "mid-text" not in why, (sep, why)


class BoundedAndSeparated(SeparatesWordAfterMedia):
    """Each image as boundary + media + boundary (adjacent images share one boundary), and a space between the
    closing boundary and a word right after it: both rewrites of Idefics2's processor at once."""

    def __call__(self, text, images=None, **kw):
        import re

        tok, image = self.tokenizer, self.real.image_token
        b = tok.eos_token
        out = text[0].replace(image, b + "\0" * 4 + b).replace(b + b, b).replace("\0", image)
        out = re.sub(rf"{re.escape(b)}(?=[^\s<])", b + " ", out)
        return {"input_ids": [tok.encode(out, add_special_tokens=False)]}


def test_the_closing_boundary_and_the_separator_after_it_are_both_measured(probe_and_proc):
    from PIL import Image

    me, proc = probe_and_proc
    image = Image.new("RGB", (64, 64))
    wrapped = BoundedAndSeparated(proc)
    tok = proc.tokenizer
    exp, pre, post, _ = me.one_expansion(wrapped, proc.image_token, image)
    assert tok.convert_ids_to_tokens(exp)[-1] == tok.eos_token and post == 0  # the closing boundary is the image's
    sep, why = me.separator_after_media(wrapped, proc.image_token, image, exp, pre)
    assert sep and sep["text"] == " ", (sep, why)  # the space alone, not boundary + space
