"""Chat templates the data JSON names (``basic_parameters.template``), registered by name.

Stand-in for the framework's template registry: the same registration shape (a call with ``name=`` and the
``format_user`` / ``format_assistant`` / ``format_system`` / ``format_prefix`` formatters, each a list of ``slots``:
text with ``{{content}}`` or a set naming a special token), so the route's data gate reads a template here as it
reads one on a real checkout. This stand-in's dataset reads pre-tokenized rows and renders nothing itself.
"""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass
class Formatter:
    slots: List[Any] = field(default_factory=list)

    def apply(self, content: str = "", tokens: Optional[Dict[str, str]] = None) -> str:
        out = []
        for slot in self.slots:
            if isinstance(slot, str):
                out.append(slot.replace("{{content}}", content))
            else:
                out.extend((tokens or {}).get(name, "") for name in slot)
        return "".join(out)


@dataclass
class ChatTemplate:
    format_user: Formatter
    format_assistant: Formatter
    format_system: Formatter
    format_prefix: Formatter
    default_system: str = ""


TEMPLATES: Dict[str, ChatTemplate] = {}


def register_template(name: str, format_user: Formatter, format_assistant: Formatter,
                      format_system: Optional[Formatter] = None, format_prefix: Optional[Formatter] = None,
                      default_system: str = "") -> None:
    TEMPLATES[name] = ChatTemplate(format_user, format_assistant, format_system or format_user,
                                   format_prefix or Formatter(), default_system)


register_template(
    name="qwen2vl",
    format_user=Formatter(slots=["<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n"]),
    format_assistant=Formatter(slots=["{{content}}<|im_end|>\n"]),
    format_system=Formatter(slots=["<|im_start|>system\n{{content}}<|im_end|>\n"]),
    default_system="You are a helpful assistant.",
)
