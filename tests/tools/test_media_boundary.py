"""``one_expansion`` (probes/media_expansion.py): a boundary token that images next to each other share belongs to the
media, not to "ids the processor adds around the text". Seen in the open-world sweep (an Idefics-style processor:
``<fake><image>*n<fake>`` for one image, ``<fake><image>*n<fake><image>*n<fake>`` for two): the one-vs-two repeat is
``<fake><image>*n``, the closing ``<fake>`` was read as a trailing id, and the generated plugin left it out of every
expansion (G2: "prompt ids differ from the source's"). A processor that writes an eos after any text keeps it as
such: the same id ends a text with no image."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"
F, I, E = 901, 902, 903  # boundary, image token, eos
N = 3


@pytest.fixture(scope="module")
def me():
    sys.path.insert(0, str(PROBES))
    try:
        for name in ("_processor", "media_expansion"):
            sys.modules.pop(name, None)
        import media_expansion
    finally:
        sys.path.remove(str(PROBES))
    return media_expansion


class _Proc:
    """Text is split into placeholders ('<ph>') and letters (one id each, ord)."""

    def __init__(self, shared_boundary: bool, eos: bool):
        self.shared, self.eos = shared_boundary, eos

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]

    def __call__(self, text, images=None, **_):
        ids, run = [], False
        for part in text[0].replace("<ph>", "\0"):
            if part == "\0":
                ids += ([F] if self.shared else []) + [I] * N
                run = True
                continue
            if run and self.shared:
                ids.append(F)  # the boundary that closes a run of images
            run = False
            ids.append(ord(part))
        if run and self.shared:
            ids.append(F)
        return {"input_ids": [ids + ([E] if self.eos else [])]}


def test_a_shared_closing_boundary_belongs_to_the_expansion(me):
    proc = _Proc(shared_boundary=True, eos=False)
    assert proc(["<ph><ph>"])["input_ids"][0] == [F, *[I] * N, F, *[I] * N, F]  # the fake behaves as described
    exp, pre, post, _ = me.one_expansion(proc, "<ph>", object())
    assert (exp, pre, post) == ([F, *[I] * N, F], 0, 0)


def test_an_eos_after_any_text_stays_a_trailing_id(me):
    exp, pre, post, _ = me.one_expansion(_Proc(shared_boundary=False, eos=True), "<ph>", object())
    assert (exp, pre, post) == ([I] * N, 0, 1)
