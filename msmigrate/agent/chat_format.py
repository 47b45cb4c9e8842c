"""Recover a family's turn format (template slots) from its own chat template, by rendering it with sentinel
messages in a sandbox (the template is data from the source, never trusted code) and cutting around the sentinels.

Conversation renders are used, not the generation prompt: training sequences are whole conversations, and some
templates render the generation prompt slightly differently (LLaVA's ``ASSISTANT:`` vs ``ASSISTANT: ``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from jinja2 import TemplateError
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


class ChatFormatError(ValueError):
    pass


def _render(template: str, messages: list[dict], bos: str, eos: str, generation: bool = False) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    try:
        return env.from_string(template).render(messages=messages, add_generation_prompt=generation, bos_token=bos,
                                                eos_token=eos)
    except TemplateError as exc:
        raise ChatFormatError(f"the chat template does not render plain-text messages: {exc}") from exc


def _msg(role: str, text: str) -> dict:
    return {"role": role, "content": text}


def derive_chat_format(template: str, bos: str = "", eos: str = "") -> ChatFormat:
    one = _render(template, [_msg("user", U1), _msg("assistant", A1)], bos, eos)
    two = _render(template, [_msg("user", U1), _msg("assistant", A1), _msg("user", U2), _msg("assistant", A2)], bos, eos)
    sys_ = _render(template, [_msg("system", S), _msg("user", U1), _msg("assistant", A1)], bos, eos)
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
    prompt = _render(template, [_msg("user", U1)], bos, eos, generation=True)
    generation = prompt[prompt.index(U1) + len(U1):] if U1 in prompt else ""
    return ChatFormat(prefix=prefix, user=user_head + "{{content}}" + between, assistant="{{content}}" + assistant_end,
                      system=system, default_system=default_system, stop_word=stop,
                      generation_prompt=generation if generation != between else None)
