"""Recover a family's turn format (template slots) from its own chat template, by rendering it with sentinel
messages in a sandbox (the template is data from the source, never trusted code) and cutting around the sentinels.

Conversation renders are used, not the generation prompt: training sequences are whole conversations, and some
templates render the generation prompt slightly differently (LLaVA's ``ASSISTANT:`` vs ``ASSISTANT: ``)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from jinja2.sandbox import ImmutableSandboxedEnvironment

S, U1, A1, U2, A2 = "QQSYSQQ", "QQUSERONEQQ", "QQASSTONEQQ", "QQUSERTWOQQ", "QQASSTTWOQQ"
_SPECIAL = re.compile(r"<[^<>\s]+>|\[[^\[\]\s]+\]")


@dataclass
class ChatFormat:
    prefix: str  # emitted once at the start (bos, [gMASK]<sop>, …)
    user: str  # user turn + assistant header, with {{content}}
    assistant: str  # assistant content + end of turn, with {{content}}
    system: str | None  # system turn with {{content}}, None when the template has no system turn
    default_system: str
    stop_word: str | None
    # what the template emits after a lone user turn's content to prompt an answer (add_generation_prompt), kept
    # only where it differs from the conversation render's user end + assistant header (LLaVA: no trailing space).
    # Training uses the conversation render; inference parity checks need this one.
    generation_prompt: str | None = None
    # what the template writes at the end of the user header before text-first content but leaves out before
    # content that starts with an image (Idefics3: `User: text` but `User:<image>`); "" where both are the same
    media_first_cut: str = ""
    # the content form the template takes: "structured" (a list of {"type": "text", ...} parts, what processors'
    # apply_chat_template passes) or "string" (a template that concatenates ``message['content']`` as text: the
    # structured form makes it raise, so its conversations are rendered with string content)
    content_form: str = "structured"

    @property
    def answer_lead(self) -> str:
        """Whitespace that ends the assistant header in a conversation but not in the generation prompt (LLaVA's
        ``ASSISTANT: `` vs ``ASSISTANT:``): it belongs to the answer, where the tokenizer merges it into the
        answer's first token (`` The``) as it does on the source's whole rendered text."""
        if not self.generation_prompt:
            return ""
        lead = self.user[len(self.user.rstrip(" \t")):]
        return lead if lead and self.user[: len(self.user) - len(lead)].endswith(self.generation_prompt) else ""

    @property
    def user_slot(self) -> str:
        """The user slot for the generated pipeline: without ``answer_lead`` (the assistant slot has it), and
        without ``media_first_cut`` (the generated mm_plugin writes it before text-first content itself)."""
        user = self.user[: len(self.user) - len(self.answer_lead)]
        cut = self.media_first_cut + "{{content}}"
        return user.replace(cut, "{{content}}", 1) if self.media_first_cut and cut in user else user

    @property
    def assistant_slot(self) -> str:
        return self.answer_lead + self.assistant

    def closes_answer(self, eos: str = "") -> bool:
        """Whether the template itself ends an assistant turn with a token (the stop word or eos): then the
        pipeline must not append another eos after the answer (efficient_eos would double it)."""
        end = self.assistant.replace("{{content}}", "", 1)
        return any(t and t in end for t in (self.stop_word, eos))


class ChatFormatError(ValueError):
    pass


def _render(template: str, messages: list[dict], bos: str, eos: str, generation: bool = False) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    try:
        return env.from_string(template).render(messages=messages, add_generation_prompt=generation, bos_token=bos,
                                                eos_token=eos)
    except Exception as exc:  # noqa: BLE001 — the template is the source's code: whatever it raises (a TypeError
        # from `'...' + message['content']` on list content) is a fact about the template, never a crash
        raise ChatFormatError(f"the chat template does not render these messages: {type(exc).__name__}: "
                              f"{' '.join(str(exc).split())[:300]}") from exc


def _content(text: str, form: str) -> str | list[dict]:
    return [{"type": "text", "text": text}] if form == "structured" else text


def _msg(role: str, text: str, form: str = "string") -> dict:
    return {"role": role, "content": _content(text, form)}


def _media_first_cut(template: str, bos: str, eos: str, user_head: str) -> str:
    """Render one user turn with structured content starting with an image, and with text only; what the text-first
    render has before the text that the image-first one lacks (after their common prefix) is the cut, where the
    user header ends with it. A template that does not render structured content has no such difference."""
    def head(content: list[dict]) -> str | None:
        try:
            text = _render(template, [{"role": "user", "content": content}], bos, eos)
        except ChatFormatError:
            return None
        return text[: text.index(U1)] if U1 in text else None

    with_image = head([{"type": "image"}, {"type": "text", "text": U1}])
    text_only = head([{"type": "text", "text": U1}])
    if with_image is None or text_only is None:
        return ""
    cut = text_only[len(os.path.commonprefix([with_image, text_only])):]
    return cut if cut and user_head.endswith(cut) else ""


def takes_structured_content(template: str, bos: str = "", eos: str = "") -> bool:
    """Whether the template renders structured content (a list of ``{"type": "text"}`` parts, what a processor's
    ``apply_chat_template`` passes) with the text in it; a template that concatenates ``message['content']`` as a
    string raises on it (or drops it) and must be given string content."""
    try:
        text = _render(template, [_msg("user", U1, "structured"), _msg("assistant", A1, "structured")], bos, eos)
    except ChatFormatError:
        return False
    return U1 in text and A1 in text


def derive_chat_format(template: str, bos: str = "", eos: str = "") -> ChatFormat:
    """The turn format, from renders with string content (the text the slots hold; some templates take structured
    content for user turns only), else with structured content; ``content_form`` records which form the template
    takes — the structured form where it renders, the string form where only that one does."""
    failures = []
    structured = takes_structured_content(template, bos, eos)
    for form in ("string", "structured"):
        try:
            fmt = _derive(template, bos, eos, form)
        except ChatFormatError as exc:
            failures.append(f"{form} content: {exc}")
            continue
        fmt.content_form = "structured" if structured else "string"
        if not structured:
            fmt.media_first_cut = ""  # only a structured render can put an image before the text
        return fmt
    raise ChatFormatError("; ".join(failures))


def _derive(template: str, bos: str, eos: str, form: str) -> ChatFormat:
    def msg(role: str, text: str) -> dict:
        return _msg(role, text, form)

    one = _render(template, [msg("user", U1), msg("assistant", A1)], bos, eos)
    two = _render(template, [msg("user", U1), msg("assistant", A1), msg("user", U2), msg("assistant", A2)], bos, eos)
    sys_ = _render(template, [msg("system", S), msg("user", U1), msg("assistant", A1)], bos, eos)
    for text, needles in ((one, (U1, A1)), (two, (U1, A1, U2, A2))):
        if any(n not in text for n in needles):
            raise ChatFormatError("the chat template drops message content")
    between = one[one.index(U1) + len(U1): one.index(A1)]  # user end + assistant header
    assistant_end = one[one.index(A1) + len(A1):]
    gap = two[two.index(A1) + len(A1): two.index(U2)]  # assistant end + next user header
    if not gap.startswith(assistant_end.rstrip("\n ")):
        raise ChatFormatError("turn boundaries are not regular (assistant end differs between turns)")
    assistant_end = gap[: len(assistant_end)] if gap.startswith(assistant_end) else assistant_end.rstrip("\n ")
    user_head = gap[len(assistant_end):]
    before_first = one[: one.index(U1)]
    if not before_first.endswith(user_head):
        raise ChatFormatError("the first user turn is formatted differently from later ones")
    head = before_first[: len(before_first) - len(user_head)]  # global prefix (+ default system block)
    system, default_system, prefix = None, "", head
    sys_before = sys_[: sys_.index(U1)]
    if S in sys_before and sys_before.endswith(user_head):
        block = sys_before[: len(sys_before) - len(user_head)]
        pre, post = block.split(S, 1)
        if head.startswith(pre) and head.endswith(post) and len(head) > len(pre) + len(post):
            default_system = head[len(pre): len(head) - len(post)]  # a default system prompt is always emitted
            prefix, system = "", pre + "{{content}}" + post
        else:
            common = head if pre.startswith(head) else ""
            prefix, system = common, pre[len(common):] + "{{content}}" + post
    stops = _SPECIAL.findall(assistant_end)
    stop = stops[0] if stops else (eos or None)
    prompt = _render(template, [msg("user", U1)], bos, eos, generation=True)
    generation = prompt[prompt.index(U1) + len(U1):] if U1 in prompt else ""
    return ChatFormat(prefix=prefix, user=user_head + "{{content}}" + between, assistant="{{content}}" + assistant_end,
                      system=system, default_system=default_system, stop_word=stop,
                      generation_prompt=generation if generation != between else None,
                      media_first_cut=_media_first_cut(template, bos, eos, user_head), content_form=form)
