"""The generated mm_plugin writes the processor's separator between an image and a word right after it. Seen in the
open-world sweep: a processor that turns ``<boundary>Describe`` into ``<boundary> Describe`` (its own rewrite of the
text next to the media) failed G2's prompt parity, since the plugin expands each image on its own and joins the
text as it is."""

from __future__ import annotations

from PIL import Image
from transformers import ProcessorMixin

from test_generated_plugin_image_path import _plugin_module


class _Tokenizer:
    def decode(self, ids, **_):
        return "".join("<t>" if i == 7 else "<b>" for i in ids)


class _ImageProcessor:
    pass


class _Processor(ProcessorMixin):
    """Two boundary ids around two media ids per image (only the call path is exercised: no ProcessorMixin setup)."""

    def __init__(self):  # noqa: D401
        self.tokenizer, self.image_processor = _Tokenizer(), _ImageProcessor()

    def __call__(self, text=None, images=None, **_):
        return {"input_ids": [[8, 7, 7, 8] * len(images)]}


def _content(plugin, text, n_images):
    images = [Image.new("RGB", (32, 32))] * n_images
    return plugin.process_messages([{"role": "user", "content": text}], images, [], [], _Processor())[0]["content"]


def test_separator_only_before_a_word_that_follows_the_media():
    module = _plugin_module()
    cls = type("Sep", (module.ProcessorExpansionPlugin,), {"placeholder": "<ph>", "separator_after_media": " "})
    plugin = cls(image_token="<t>", video_token=None, audio_token=None)
    exp = "<b><t><t><b>"
    assert _content(plugin, "<image>Describe it.", 1) == exp + " Describe it."
    assert _content(plugin, "<image> Describe it.", 1) == exp + " Describe it."  # the text has one: none added
    assert _content(plugin, "<image>\nDescribe", 1) == exp + "\nDescribe"
    assert _content(plugin, "<image><image>Hi", 2) == exp + exp + " Hi"  # adjacent images: only before the word
    assert _content(plugin, "Look: <image>", 1) == "Look: " + exp  # nothing follows
    plain = type("Plain", (module.ProcessorExpansionPlugin,), {"placeholder": "<ph>"})(
        image_token="<t>", video_token=None, audio_token=None)
    assert _content(plain, "<image>Describe", 1) == exp + "Describe"
