"""The rules policy declines the model phase, with the processor's reason, when the source's own processing makes no
batch from the samples and the data phase would need that measurement (branch B): G1 used to run its forward on a
text-only synthetic batch instead, and a forward that needs pixels failed G1 (the honest decline lived in the data
phase, never reached)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from msmigrate.agent.policies.base import PhaseUnsupported
from msmigrate.agent.routes.fsdp2.rules.model import next_calls
from msmigrate.tools.media_expansion import MediaExpansion


def view(plan):
    return SimpleNamespace(state={"plan": plan}, messages=[], ctx=SimpleNamespace(source=SimpleNamespace(name="s")))


def test_no_faithful_batch_declines_at_the_model_phase():
    failed = MediaExpansion(ok=False, error="no image placeholder: the chat template renders none")
    plan = {"route": "transformers", "hf_class": "Qwen2VLForConditionalGeneration", "architecture": "decoder",
            "data_branch": "B", "media_expansion": failed.to_dict(), "model_id": "m", "plugin_dir": "p"}
    with pytest.raises(PhaseUnsupported) as info:
        next_calls(view(plan), None)
    assert "G1" in info.value.line and "no image placeholder" in info.value.line
    # a measured expansion, or a branch that does not need it (C: the dataset plugin), goes on to write the plugin
    assert next_calls(view(dict(plan, media_expansion=MediaExpansion(ok=True).to_dict())), None)[1]
    assert next_calls(view(dict(plan, data_branch="C")), None)[1]


@pytest.mark.parametrize("error, advice", [
    # ShieldGemma 2: "run it with --policy llm" was the advice for a processor that drops the samples' text
    ("ValueError: a second image added 0 ids (the processor's ids do not change with the text it is given: it writes "
     "a prompt of its own, …)", "nothing to migrate as a chat model"),
    ("no image placeholder: the chat template renders no image placeholder", "chat_template.jinja"),
    ("ValueError: the two-image expansion is not the one-image expansion repeated (the processor writes 4 more ids "
     "for one image given a text with no placeholder: it places its images itself, …)", "interleaved prompt list"),
    ("ValueError: something else", "--policy llm"),
])
def test_the_decline_advice_follows_the_processor_reason(error, advice):
    plan = {"route": "transformers", "hf_class": "X", "architecture": "decoder", "data_branch": "B",
            "media_expansion": MediaExpansion(ok=False, error=error).to_dict(), "model_id": "m", "plugin_dir": "p"}
    with pytest.raises(PhaseUnsupported) as info:
        next_calls(view(plan), None)
    assert advice in info.value.todo, info.value.line


def test_an_encoder_decoder_decline_does_not_send_the_user_to_another_policy():
    plan = {"route": "transformers", "hf_class": "T5Gemma2ForConditionalGeneration", "architecture": "encoder-decoder",
            "reasons": ["architecture encoder-decoder: config.json is_encoder_decoder"], "model_id": "m",
            "plugin_dir": "p"}
    with pytest.raises(PhaseUnsupported) as info:
        next_calls(view(plan), None)
    assert "--policy llm" not in info.value.todo and "no training path" in info.value.todo
