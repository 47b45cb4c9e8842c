"""Remote code whose own AutoProcessor handles images (held-out MiniCPM-V-style check: a processor in the
checkpoint's remote code writes `<image><unk>…</image>` plus slice runs): the plan measures its media expansion as
it does for a native processor, and does not call outputs "dropped" that a dict-taking forward reads."""

from __future__ import annotations

from types import SimpleNamespace

from msmigrate.agent.nodes.plan import make_plan, remote_processor_expands
from msmigrate.tools.media_expansion import ImageExpansion, MediaExpansion
from msmigrate.tools.runtime_processor import RuntimeProcessor

PROCESSOR = RuntimeProcessor(ok=True, loaded=True, processor_class="SlicerProcessor", kind="processor",
                             parts={"tokenizer": "T", "image_processor": "I"}, handles_images=True)


def expansion(counts_lengths):
    images = [ImageExpansion(image=f"im{i}", size=[64 * (i + 1), 48], count=c, length=n, text="<im>…</im>\n",
                             prefix=["<im>"], suffix=["</sl>", "\n"], break_tokens=["\n"])
              for i, (c, n) in enumerate(counts_lengths)]
    return MediaExpansion(ok=True, processor_class="SlicerProcessor", loaded_via="AutoProcessor",
                          placeholder="(<im>./</im>)\n", placeholder_source="chat template", media_token="<unk>",
                          media_token_id=2, media_token_source="most repeated id of the expansion", kind="per_image",
                          per_image=images, keys_with_image=["attention_mask", "bound", "input_ids", "pixel_values"],
                          keys_text_only=["attention_mask", "input_ids"], image_processor_keys=["pixel_values", "sizes"])


def plan_for(signature: str, exp: MediaExpansion):
    src = {"needs_trust_remote_code": True, "architectures": ["SlicerModel"], "model_type": "slicer",
           "custom_code_files": ["modeling_slicer.py"], "forward": {"source": "static", "signature": signature},
           "auto_map": {"AutoModel": "modeling_slicer.SlicerModel"}}
    deps = SimpleNamespace(ctx=SimpleNamespace(model_name="slicer", source="/nonexistent"))
    state = {"source_summary": src, "target_summary": {"templates": [], "similar_cases": [{"example": "e.yaml"}]}}
    return make_plan(deps, state, exp, runtime_processor=PROCESSOR)


def test_only_a_processor_that_handles_images_is_probed():
    assert remote_processor_expands(PROCESSOR)
    bare = RuntimeProcessor(ok=True, loaded=True, processor_class="Tok", kind="tokenizer", handles_images=False)
    assert not remote_processor_expands(bare) and not remote_processor_expands(None)
    assert not remote_processor_expands(RuntimeProcessor(ok=False, error="timed out"))


def test_a_dict_taking_remote_forward_gets_no_dropped_outputs():
    plan = plan_for("forward(self, data, **kwargs)", expansion([(20, 33), (20, 32)]))
    # the measured expansion reaches the plan (the data gate reads its media token id)
    assert plan["media_expansion"]["media_token"] == "<unk>" and plan["media_expansion"]["media_token_id"] == 2
    # no contract saying pixel_values is "dropped: the forward has no such parameter": the forward reads a dict
    assert plan["data_contract"] is None
    assert not any("dropped" in r for r in plan["reasons"])
    why = next(r for r in plan["reasons"] if r.startswith("the remote forward"))
    assert "forward(self, data, **kwargs)" in why and "'pixel_values'" in why and "'bound'" in why


def test_a_remote_forward_naming_its_inputs_keeps_the_contract():
    plan = plan_for("forward(self, input_ids, pixel_values=None, attention_mask=None, labels=None)",
                    expansion([(20, 33), (24, 37)]))
    contract = plan["data_contract"]
    assert contract["mm_input_keys"] == ["pixel_values"]
    assert {d["key"] for d in contract["dropped"]} == {"sizes", "bound"}
    assert not any(r.startswith("the remote forward") for r in plan["reasons"])


def test_same_count_different_layout_is_described_as_such():
    same = expansion([(20, 33), (20, 32)]).describe()
    assert "N = 20 for every probed image" in same and "64x48 -> 33" in same and "128x48 -> 32" in same
    differs = expansion([(20, 33), (24, 37)]).describe()
    assert "depends on the image: 64x48 -> 20, 128x48 -> 24" in differs
    # the suffix's newline is shown escaped: the description stays one line in the plan's reasons
    assert "\n" not in same and "</sl>\\n" in same


def test_the_plan_lists_the_media_tokens_the_processor_writes():
    """Measured, not name-matched: the slice processor writes `<unk>`, its start/end/break tokens — and the
    tokenizer's `<box>`/`<ref>` (media-named, never written) are said to be unwritten."""
    exp = expansion([(20, 33), (20, 32)])
    plan = plan_for("forward(self, data, **kwargs)", exp)
    assert plan["media_tokens_written"] == ["<unk>", "<im>", "</sl>"]  # the newline break is text, not a token
    src_tokens = {"media_tokens": {"<box>": 9, "<ref>": 10, "<im>": 11}}
    deps = SimpleNamespace(ctx=SimpleNamespace(model_name="slicer", source="/nonexistent"))
    src = {"needs_trust_remote_code": True, "architectures": ["SlicerModel"], "model_type": "slicer",
           "custom_code_files": ["modeling_slicer.py"], "tokens": src_tokens,
           "forward": {"source": "static", "signature": "forward(self, data, **kwargs)"},
           "auto_map": {"AutoModel": "modeling_slicer.SlicerModel"}}
    state = {"source_summary": src, "target_summary": {"templates": [], "similar_cases": [{"example": "e.yaml"}]}}
    why = next(r for r in make_plan(deps, state, exp, runtime_processor=PROCESSOR)["reasons"]
               if r.startswith("media tokens the source processor writes"))
    assert "['<unk>', '<im>', '</sl>']" in why and "never wrote here: ['<box>', '<ref>']" in why
