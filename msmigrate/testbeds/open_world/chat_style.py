"""The chat template of a tiny source: the one the family's processor module ships, else the published prompt style
its special tokens identify (ChatML, [INST], turn tokens, header tokens), else the plain ``USER:/ASSISTANT:`` style.
``source`` says which, and the sweep prints it: an inferred style is not the family's own template."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from ..fixtures.chat_templates import NL, _CONTENT, _lit, _set
from .tokens import FamilyTokens


@dataclass(frozen=True)
class ChatStyle:
    template: str
    source: str  # "processor default" | "inferred: <style>"


def shipped_template(processor_cls) -> str | None:
    """A module-level chat template string in the processor's module (e.g. a ``DEFAULT_CHAT_TEMPLATE``)."""
    module = inspect.getmodule(processor_cls)
    for name, value in sorted(vars(module).items()):
        if "chat_template" in name.lower() and isinstance(value, str) and "{%" in value and "message" in value:
            return value
    return None


def _turns(open_role: str, close: str, assistant: str, prefix: str = "") -> str:
    """A template whose turns are ``open_role`` (``ROLE`` replaced by the role) + content + ``close``."""
    head = open_role.replace("ROLE", "' + message['role'] + '")
    return (prefix + "{% for message in messages %}{{ '" + head + "' }}" + _CONTENT + _lit(close) + "{% endfor %}"
            + "{% if add_generation_prompt %}" + _lit(assistant) + "{% endif %}")


def image_placeholders(tokens: FamilyTokens, processor_image_token: str | None = None) -> list[str]:
    """What a chat template may write for one image, most likely first: the built processor's ``image_token``, the
    family's named image token, then its other image-ish named tokens (a begin-of-image token the processor
    expands, …)."""
    named = tokens.named
    first = [processor_image_token] if processor_image_token else []
    first += [named["image_token"]] if "image_token" in named else []
    rest = [t for k, t in named.items() if k != "image_token" and any(w in k for w in ("image", "img", "boi", "vision"))]
    return list(dict.fromkeys(first + rest)) or ["<image>"]


def infer_style(tokens: FamilyTokens, image: str | None = None) -> ChatStyle:
    have = set(tokens.all())
    image = image if image is not None else image_placeholders(tokens)[0]
    video = tokens.named.get("video_token", "<video>")
    setter = _set(image, video)
    if "<|im_start|>" in have:
        return ChatStyle(setter + _turns("<|im_start|>ROLE\\n", "<|im_end|>\n", "<|im_start|>assistant\n"),
                         "inferred: ChatML")
    if "[INST]" in have and "[/INST]" in have:
        body = ("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}[INST]" + _CONTENT
                + "[/INST]{% else %}" + _CONTENT + "{{ eos_token }}{% endif %}{% endfor %}")
        return ChatStyle(setter + body, "inferred: [INST]")
    if "<start_of_turn>" in have:
        return ChatStyle(setter + "{{ bos_token }}" + _turns("<start_of_turn>ROLE\\n", "<end_of_turn>\n",
                                                             "<start_of_turn>model\n"), "inferred: turn tokens")
    for start, end in (("<|header_start|>", "<|header_end|>"), ("<|start_header_id|>", "<|end_header_id|>")):
        if start in have and end in have:
            close = "<|eot|>" if "<|eot|>" in have else "<|eot_id|>"
            return ChatStyle(setter + "{{ bos_token }}" + _turns(start + "ROLE" + end + "\\n\\n", close,
                                                                 start + "assistant" + end + "\n\n"),
                             "inferred: header tokens")
    bos = "{% if bos_token %}{{ bos_token }}{% endif %}"
    body = (bos + "{% for message in messages %}{% if message['role'] == 'user' %}USER: " + _CONTENT + " "
            + "{% else %}ASSISTANT: " + _CONTENT + "{{ eos_token }}" + "{% endif %}{% endfor %}"
            + "{% if add_generation_prompt %}ASSISTANT:{% endif %}")
    return ChatStyle(setter + body, "inferred: USER/ASSISTANT")


def chat_styles(processor_cls, tokens: FamilyTokens, processor_image_token: str | None = None) -> list[ChatStyle]:
    """Candidate templates, best first: the shipped one, else the inferred style with each image placeholder."""
    shipped = shipped_template(processor_cls)
    if shipped:
        return [ChatStyle(shipped, "processor default")]
    styles = [infer_style(tokens, image) for image in image_placeholders(tokens, processor_image_token)]
    # last: no placeholder at all, for processors that put the media tokens in front of the text themselves
    bare = infer_style(tokens, "")
    return [*styles, ChatStyle(bare.template, bare.source + ", no image placeholder")]


__all__ = ["ChatStyle", "chat_styles", "image_placeholders", "infer_style", "shipped_template", "NL"]
