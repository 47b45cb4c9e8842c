"""derive_chat_format recovers each fixture family's turn format from its chat template; for Qwen2-VL it must equal
the slots the stand-in registers for its ``qwen2vl`` template (what branch A would reuse)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from msmigrate.agent.chat_format import ChatFormat, ChatFormatError, derive_chat_format
from msmigrate.testbeds import standin
from msmigrate.testbeds.fixtures import chat_templates as ct

STANDIN_TEMPLATES = Path(standin.__file__).parent / "tree/mindspeed_mm/fsdp/data/data_utils/func_utils/template.py"
IM = "<|im_start|>{role}\n{{{{content}}}}<|im_end|>\n"
CHATML = dict(prefix="", user=IM.format(role="user") + "<|im_start|>assistant\n", assistant="{{content}}<|im_end|>\n",
              system=IM.format(role="system"), stop_word="<|im_end|>")

# (template, bos, eos) → expected format, read off each family's published turn layout.
CASES = {
    "qwen2_vl": (ct.QWEN2_VL, "", "<|im_end|>", {**CHATML, "default_system": "You are a helpful assistant."}),
    "qwen3_vl": (ct.QWEN3_VL, "", "<|im_end|>", {**CHATML, "default_system": ""}),
    "internvl_hf": (ct.INTERNVL_HF, "", "<|im_end|>", {**CHATML, "default_system": "You are a helpful assistant."}),
    "internvl_chat": (ct.INTERNVL_CHAT, "", "<|im_end|>", {**CHATML, "default_system": "You are a helpful assistant."}),
    "glm4v": (ct.GLM4V, "", "<|endoftext|>", dict(
        prefix="[gMASK]<sop>", user="<|user|>\n{{content}}<|assistant|>\n", assistant="{{content}}",
        system="<|system|>\n{{content}}", default_system="", stop_word="<|endoftext|>")),
    "llava": (ct.LLAVA, "<s>", "</s>", dict(
        prefix="", user="USER: {{content}} ASSISTANT: ", assistant="{{content}}</s> ", system="{{content}} ",
        default_system="", stop_word="</s>", generation_prompt=" ASSISTANT:")),
    "idefics3": (ct.IDEFICS3, "<|begin_of_text|>", "<end_of_utterance>", dict(
        prefix="<|begin_of_text|>", user="User: {{content}}<end_of_utterance>\nAssistant: ",
        assistant="{{content}}<end_of_utterance>\n", system="System: {{content}}<end_of_utterance>\n",
        default_system="", stop_word="<end_of_utterance>", generation_prompt="<end_of_utterance>\nAssistant:",
        media_first_cut=" ")),  # `User:<image>` but `User: text`
    "smolvlm": (ct.SMOLVLM, "", "<end_of_utterance>", dict(
        prefix="<|im_start|>", user="User: {{content}}<end_of_utterance>\nAssistant: ",
        assistant="{{content}}<end_of_utterance>\n", system="System: {{content}}<end_of_utterance>\n",
        default_system="", stop_word="<end_of_utterance>", generation_prompt="<end_of_utterance>\nAssistant:",
        media_first_cut=" ")),
    "gemma3": (ct.GEMMA3, "<bos>", "<eos>", dict(
        prefix="<bos>", user="<start_of_turn>user\n{{content}}<end_of_turn>\n<start_of_turn>model\n",
        assistant="{{content}}<end_of_turn>\n", system="<start_of_turn>system\n{{content}}<end_of_turn>\n",
        default_system="", stop_word="<end_of_turn>")),
    "patchlm": (ct.PATCHLM, "", "<|end|>", dict(
        prefix="", user="<|user|>{{content}}<|end|>\n<|assistant|>", assistant="{{content}}<|end|>\n",
        system="<|system|>{{content}}<|end|>\n", default_system="", stop_word="<|end|>")),
    # formats beyond ChatML
    "llava_next": (ct.LLAVA_NEXT, "<s>", "</s>", dict(  # [INST] without a system turn, no generation branch
        prefix="<s>", user="[INST] {{content}} [/INST] ", assistant="{{content}}</s>", system=None,
        default_system="", stop_word="</s>", generation_prompt=" [/INST]")),
    "mistral3": (ct.MISTRAL3, "<s>", "</s>", dict(  # [INST] + a default system prompt that is always emitted
        prefix="", user="[INST]{{content}}[/INST]", assistant="{{content}}</s>",
        system="<s>[SYSTEM_PROMPT]{{content}}[/SYSTEM_PROMPT]",
        default_system="You are a small vision assistant. Answer briefly.", stop_word="</s>")),
    "paligemma": (ct.PALIGEMMA, "<bos>", "<eos>", dict(  # prefix-LM: no roles, prompt + "\n", then the suffix
        prefix="", user="<bos>{{content}}\n", assistant="{{content}}<eos>", system=None, default_system="",
        stop_word="<eos>")),
    "aya_vision": (ct.AYA_VISION, "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>", dict(  # turn tokens with role names
        prefix="<BOS_TOKEN>",
        user="<|START_OF_TURN_TOKEN|><|USER_TOKEN|>{{content}}<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|>"
             "<|CHATBOT_TOKEN|>", assistant="{{content}}<|END_OF_TURN_TOKEN|>",
        system="<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>{{content}}<|END_OF_TURN_TOKEN|>", default_system="",
        stop_word="<|END_OF_TURN_TOKEN|>")),
    "llava_onevision": (ct.LLAVA_ONEVISION, "", "<|im_end|>", {**CHATML,
                                                               "default_system": "You are a helpful assistant."}),
    "chameleon": (ct.CHAMELEON, "<s>", "</s>", dict(  # plain text, a reserved token ends the answer
        prefix="<s>", user="{{content}}", assistant="{{content}}<reserved08706>", system="{{content}}<reserved08706>",
        default_system="", stop_word="<reserved08706>")),
    "florence2": (ct.FLORENCE2, "<s>", "</s>", None),
    # ChatML concatenating message['content'] as a string: structured content raises TypeError in it
    "phi3_v": (ct.PHI3_V, "<s>", "<|endoftext|>", dict(  # role tags, string content only
        prefix="", user="<|user|>\n{{content}}<|end|>\n<|assistant|>\n", assistant="{{content}}<|end|>\n",
        system="<|system|>\n{{content}}<|end|>\n", default_system="", stop_word="<|end|>", content_form="string")),
    "qwen_vl_chat": (ct.QWEN_VL_CHAT, "", "<|im_end|>", {  # ChatML, a default system turn, string content only
        **CHATML, "default_system": "You are a helpful assistant.", "content_form": "string"}),
    "string_chatml": (ct.STRING_CHATML, "", "<|im_end|>", {**CHATML, "default_system": "", "content_form": "string"}),  # encoder-decoder: the answer is not in the prompt text
}


@pytest.mark.parametrize("family", sorted(CASES))
def test_every_fixture_family_chat_template(family):
    template, bos, eos, expected = CASES[family]
    if expected is None:
        with pytest.raises(ChatFormatError):
            derive_chat_format(template, bos, eos)
        return
    assert derive_chat_format(template, bos, eos) == ChatFormat(**expected)


def test_all_fixture_templates_are_covered():
    names = {n for n in dir(ct) if n.isupper() and not n.startswith("_") and isinstance(getattr(ct, n), str) and "{%" in getattr(ct, n)}
    covered = {n for n in names if any(getattr(ct, n) is c[0] for c in CASES.values())}
    assert covered == names


def _registered(name: str) -> dict:
    """Slots of ``_register_template(name=...)`` in the stand-in, read statically (the stand-in is not importable
    without its own package on the path)."""
    tree = ast.parse(STANDIN_TEMPLATES.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_register_template":
            kw = {k.arg: k.value for k in node.keywords}
            if ast.literal_eval(kw["name"]) != name:
                continue
            params = {k.arg: k.value for k in kw["params"].keywords}
            slots = {k: ast.literal_eval(v.keywords[0].value)[0] for k, v in params.items()
                     if isinstance(v, ast.Call) and getattr(v.func, "id", "") == "StringFormatter"}
            return {**slots, **{k: ast.literal_eval(params[k]) for k in ("default_system", "stop_words") if k in params}}
    raise AssertionError(f"template {name} not registered in the stand-in")


def test_qwen2_vl_equals_the_standin_qwen2vl_registration():
    fmt = derive_chat_format(ct.QWEN2_VL, "", "<|im_end|>")
    reg = _registered("qwen2vl")
    assert fmt.user == reg["format_user"]
    assert fmt.assistant == reg["format_assistant"]
    assert fmt.system == reg["format_system"]
    assert fmt.default_system == reg["default_system"]
    assert [fmt.stop_word] == reg["stop_words"]
    assert fmt.prefix == ""


def test_stop_word_falls_back_to_eos_when_the_turn_end_has_no_special_token():
    assert derive_chat_format(ct.GLM4V, "", "<eos>").stop_word == "<eos>"
    assert derive_chat_format(ct.GLM4V).stop_word is None


@pytest.mark.parametrize("template, message", [
    ("{% for m in messages %}{{ m['role'] }}{% endfor %}", "drops message content"),
    ("{{ messages[0]['content'] | nosuchfilter }}", "does not render"),
    ("{{ ''.__class__.__mro__ }}", "does not render"),  # sandboxed: no attribute escapes
    ("{% for m in messages %}{% if loop.index == 1 %}[{{ m['content'] }}]{% else %}<{{ m['content'] }}>{% endif %}"
     "{% endfor %}", "first user turn is formatted differently"),
    ("{% for m in messages %}{{ m['content'] }}{% if loop.last %}END{% else %}|{% endif %}{% endfor %}",
     "turn boundaries are not regular"),
])
def test_irregular_or_hostile_templates_are_refused(template, message):
    with pytest.raises(ChatFormatError, match=message):
        derive_chat_format(template)


def _pipeline_text(fmt: ChatFormat, turns: list[tuple[str, str]], eos: str) -> str:
    """What the generated data path writes for ``turns`` (user content with ``<image>``, answer): the registered
    slots, the mm_plugin's text lead for text-first user content, and efficient_eos's appended eos."""
    out = fmt.prefix + (fmt.system.replace("{{content}}", fmt.default_system) if fmt.default_system else "")
    for user, answer in turns:
        content = user if user.startswith("<image>") else fmt.media_first_cut + user
        out += fmt.user_slot.replace("{{content}}", content) + fmt.assistant_slot.replace("{{content}}", answer)
    return out + ("" if fmt.closes_answer(eos) else eos)


def _structured(text: str) -> list[dict]:
    head, *rest = text.split("<image>")
    items = [{"type": "text", "text": head}] if head else []
    for part in rest:
        items += [{"type": "image"}] + ([{"type": "text", "text": part}] if part else [])
    return items


@pytest.mark.parametrize("family", sorted(f for f, c in CASES.items() if c[3] is not None))
def test_generated_slots_write_what_the_source_template_renders(family):
    """Every fixture template, rendered by itself (structured content, an image first in one user turn and text
    first in the next) against what the derived slots + plugin lead + eos rule write: the same text, up to an eos
    the pipeline appends where the source leaves its last answer open. Catches a space the template drops before
    an image (Idefics3), an eos doubled after a turn the template closes itself, an answer-side space in the
    header."""
    template, bos, eos, _ = CASES[family]
    fmt = derive_chat_format(template, bos, eos)
    turns = [("<image>What is it?", "A square."), ("And the colour?", "Grey.")]
    messages = []
    for user, answer in turns:
        # the content form the template takes (a string-only template gets the text, placeholders written in it)
        content = _structured(user) if fmt.content_form == "structured" else user
        messages += [{"role": "user", "content": content}, {"role": "assistant", "content": answer}]
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    source = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(template).render(
        messages=messages, add_generation_prompt=False, bos_token=bos, eos_token=eos)
    if fmt.content_form == "structured":
        source = source.replace(_placeholder(template, bos, eos), "<image>")
    generated = _pipeline_text(fmt, turns, eos)
    if fmt.closes_answer(eos):
        assert generated == source
    else:  # an open last answer: the pipeline closes it with one eos
        assert generated == source + eos


def _placeholder(template: str, bos: str, eos: str) -> str:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    render = lambda c: env.from_string(template).render(messages=[{"role": "user", "content": c}], bos_token=bos,  # noqa: E731
                                                        eos_token=eos, add_generation_prompt=False)
    with_image, without = render([{"type": "image"}, {"type": "text", "text": "Q"}]), render([{"type": "text",
                                                                                                "text": "Q"}])
    common = len(__import__("os").path.commonprefix([with_image, without]))
    return with_image[common: with_image.index("Q", common)]


def test_answer_lead_moves_the_header_space_to_the_answer_only_where_the_generation_prompt_lacks_it():
    llava = derive_chat_format(ct.LLAVA, "<s>", "</s>")  # conversation `ASSISTANT: x`, generation `ASSISTANT:`
    assert (llava.user_slot, llava.assistant_slot) == ("USER: {{content}} ASSISTANT:", " {{content}}</s> ")
    qwen = derive_chat_format(ct.QWEN2_VL, "", "<|im_end|>")
    assert (qwen.user_slot, qwen.assistant_slot) == (qwen.user, qwen.assistant)
    assert qwen.closes_answer("<|im_end|>") and not derive_chat_format(ct.GLM4V, "", "<|endoftext|>").closes_answer(
        "<|endoftext|>")


def test_a_string_only_template_is_derived_from_string_content_and_says_so():
    """A published ChatML template doing ``'<|im_start|>' + message['role'] + '\\n' + message['content']`` raises
    TypeError on structured content: the format comes from string renders, and ``content_form`` records it."""
    fmt = derive_chat_format(ct.STRING_CHATML, "", "<|im_end|>")
    assert fmt.content_form == "string"
    assert (fmt.user, fmt.assistant, fmt.stop_word) == (CHATML["user"], CHATML["assistant"], "<|im_end|>")
    assert fmt.media_first_cut == ""
    assert derive_chat_format(ct.QWEN2_VL, "", "<|im_end|>").content_form == "structured"


@pytest.mark.parametrize("template", [
    "{{ 1 // 0 }}",  # ZeroDivisionError
    "{{ messages[7]['content'] }}{{ messages[0]['content'] + 1 }}",  # TypeError
    "{{ raise_exception('no system') if true }}",  # undefined callable
    "{% for m in messages %}{{ m['content'].nope() }}{% endfor %}",
])
def test_a_template_raising_anything_is_a_chat_format_error(template):
    with pytest.raises(ChatFormatError, match="does not render"):
        derive_chat_format(template)
