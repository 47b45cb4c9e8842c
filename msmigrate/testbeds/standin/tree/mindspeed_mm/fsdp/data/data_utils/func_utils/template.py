"""Chat templates: how a conversation becomes (prompt ids, response ids) pairs. Registry: TEMPLATES,
filled by `_register_template(name, RegisterParams(...), mm_plugin=get_mm_plugin(...), template_class=...)`."""
import logging
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from mindspeed_mm.fsdp.data.data_utils.func_utils.formatters import EmptyFormatter, StringFormatter
from mindspeed_mm.fsdp.data.data_utils.func_utils.mm_plugin import BasePlugin, get_mm_plugin

logger = logging.getLogger(__name__)


@dataclass
class Template:
    format_user: StringFormatter
    format_assistant: StringFormatter
    format_system: StringFormatter
    format_observation: StringFormatter
    format_prefix: EmptyFormatter
    format_tool: Optional[StringFormatter]
    default_system: str
    stop_words: List[str]
    efficient_eos: bool
    replace_eos: bool
    enable_thinking: Optional[bool]
    thought_words: Tuple[str, str]
    mm_plugin: BasePlugin

    def _convert_slots(self, tokenizer, slots) -> List[int]:
        ids = []
        for slot in slots:
            if isinstance(slot, str):
                if slot:
                    ids += tokenizer.encode(slot, add_special_tokens=False)
            elif isinstance(slot, set) and "eos_token" in slot:
                ids.append(tokenizer.eos_token_id)
            elif isinstance(slot, set) and "bos_token" in slot and tokenizer.bos_token_id is not None:
                ids.append(tokenizer.bos_token_id)
        return ids

    def encode_multiturn(self, tokenizer, messages: Sequence[Dict[str, str]],
                         system: Optional[str] = None) -> List[Tuple[List[int], List[int]]]:
        """Messages alternate user/assistant; returns one (source, target) id pair per turn."""
        system = system or self.default_system
        encoded = []
        for i, message in enumerate(messages):
            slots = []
            if i == 0:
                slots += self.format_prefix.apply()
                if system:
                    slots += self.format_system.apply(content=system)
            role = message["role"]
            fmt = {"user": self.format_user, "assistant": self.format_assistant,
                   "observation": self.format_observation}[role]
            slots += fmt.apply(content=message["content"])
            encoded.append(self._convert_slots(tokenizer, slots))
        return [(encoded[i], encoded[i + 1]) for i in range(0, len(encoded) - 1, 2)]


class ReasoningTemplate(Template):
    """Adds an empty thought block to responses when thinking is disabled."""

    def encode_multiturn(self, tokenizer, messages, system=None):
        messages = [dict(m) for m in messages]
        if not self.enable_thinking:
            for m in messages:
                if m["role"] == "assistant" and self.thought_words[0] not in m["content"]:
                    m["content"] = f"{self.thought_words[0]}\n\n{self.thought_words[1]}\n\n" + m["content"]
        return super().encode_multiturn(tokenizer, messages, system)


TEMPLATES: Dict[str, Template] = {}


@dataclass
class RegisterParams:
    format_user: Optional[StringFormatter] = None
    format_assistant: Optional[StringFormatter] = None
    format_system: Optional[StringFormatter] = None
    format_observation: Optional[StringFormatter] = None
    format_prefix: Optional[EmptyFormatter] = None
    tool_prompt: Optional[StringFormatter] = None
    default_system: str = ""
    stop_words: Optional[Sequence[str]] = None
    efficient_eos: bool = False
    replace_eos: bool = False
    enable_thinking: Optional[bool] = True
    thought_words: Optional[Tuple[str, str]] = None


def _register_template(name: str, params: RegisterParams, mm_plugin: BasePlugin = get_mm_plugin(name="base"),
                       template_class: type = Template) -> None:
    """Add TEMPLATES[name]. Unset formatters default to plain `{{content}}` (+ eos unless efficient_eos)."""
    eos_slots = [] if params.efficient_eos else [{"eos_token"}]
    default_user = StringFormatter(slots=["{{content}}"])
    TEMPLATES[name] = template_class(
        format_user=params.format_user or default_user,
        format_assistant=params.format_assistant or StringFormatter(slots=["{{content}}"] + eos_slots),
        format_system=params.format_system or default_user,
        format_observation=params.format_observation or params.format_user or default_user,
        format_prefix=params.format_prefix or EmptyFormatter(),
        format_tool=params.tool_prompt,
        default_system=params.default_system,
        stop_words=list(params.stop_words or []),
        efficient_eos=params.efficient_eos,
        replace_eos=params.replace_eos,
        enable_thinking=params.enable_thinking,
        thought_words=params.thought_words or ("<think>", "</think>"),
        mm_plugin=mm_plugin,
    )


_register_template(
    name="qwen2vl",
    params=RegisterParams(
        format_user=StringFormatter(slots=["<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n"]),
        format_assistant=StringFormatter(slots=["{{content}}<|im_end|>\n"]),
        format_system=StringFormatter(slots=["<|im_start|>system\n{{content}}<|im_end|>\n"]),
        format_observation=StringFormatter(slots=["<|im_start|>tool\n{{content}}<|im_end|>\n<|im_start|>assistant\n"]),
        default_system="You are a helpful assistant.",
        stop_words=["<|im_end|>"],
        replace_eos=True),
    mm_plugin=get_mm_plugin(name="qwen2_vl", image_token="<|image_pad|>", video_token="<|video_pad|>"),
)

_register_template(
    name="qwen3_vl",
    params=RegisterParams(
        format_user=StringFormatter(slots=["<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n"]),
        format_assistant=StringFormatter(slots=["{{content}}<|im_end|>\n"]),
        format_system=StringFormatter(slots=["<|im_start|>system\n{{content}}<|im_end|>\n"]),
        format_observation=StringFormatter(
            slots=["<|im_start|>user\n<tool_response>\n{{content}}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"]),
        stop_words=["<|im_end|>"],
        replace_eos=True),
    mm_plugin=get_mm_plugin(name="qwen3_vl", image_token="<|image_pad|>", video_token="<|video_pad|>"),
    template_class=ReasoningTemplate,
)

_register_template(
    name="qwen3_vl_nothink",
    params=RegisterParams(
        format_user=StringFormatter(slots=["<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n"]),
        format_assistant=StringFormatter(slots=["{{content}}<|im_end|>\n"]),
        format_system=StringFormatter(slots=["<|im_start|>system\n{{content}}<|im_end|>\n"]),
        format_observation=StringFormatter(
            slots=["<|im_start|>user\n<tool_response>\n{{content}}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"]),
        stop_words=["<|im_end|>"],
        replace_eos=True),
    mm_plugin=get_mm_plugin(name="qwen3_vl", image_token="<|image_pad|>", video_token="<|video_pad|>"),
)

_register_template(
    name="glm4.1v",
    params=RegisterParams(
        format_user=StringFormatter(slots=["<|user|>\n{{content}}<|assistant|>"]),
        format_assistant=StringFormatter(slots=["\n{{content}}"]),
        format_system=StringFormatter(slots=["<|system|>\n{{content}}"]),
        format_observation=StringFormatter(slots=["<|observation|>\n{{content}}<|assistant|>"]),
        format_prefix=EmptyFormatter(slots=["[gMASK]<sop>"]),
        stop_words=["<|user|>", "<|observation|>", "</answer>"],
        efficient_eos=True),
    mm_plugin=get_mm_plugin(name="glm4.1v", image_token="<|image|>", video_token="<|video|>"),
    template_class=ReasoningTemplate,
)

_register_template(
    name="default",
    params=RegisterParams(
        format_user=StringFormatter(slots=["Human: {{content}}", {"eos_token"}, "\nAssistant:"]),
        format_assistant=StringFormatter(slots=["{{content}}", {"eos_token"}, "\n"]),
        format_system=StringFormatter(slots=["System: {{content}}", {"eos_token"}, "\n"]),
    ),
)

_register_template(
    name="empty",
    params=RegisterParams(format_assistant=StringFormatter(slots=["{{content}}"])),
)


def get_template_and_fix_tokenizer(tokenizer, template: Optional[str]) -> Template:
    """Look the template up (None -> `empty`, standing in for the real tokenizer-jinja parse) and adapt the
    tokenizer: EOS replaced by the first stop word, pad = eos when missing, stop words added as special tokens."""
    if template is None:
        template = "empty"
    template_name = template
    template = TEMPLATES.get(template_name, None)
    if template is None:
        # The real message prints the lookup result (None), not the requested name.
        raise ValueError(f"Template {template} does not exist.")
    if template.replace_eos:
        if not template.stop_words:
            raise ValueError("Stop words are required to replace the EOS token.")
        if tokenizer.eos_token != template.stop_words[0]:
            logger.info(f"Replace eos token: {template.stop_words[0]}.")
            tokenizer.add_special_tokens({"eos_token": template.stop_words[0]})
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
        logger.info(f"Add pad token: {tokenizer.pad_token}")
    missing = [w for w in template.stop_words if w not in tokenizer.get_vocab()]
    if missing:
        tokenizer.add_tokens(missing, special_tokens=True)  # the same call on transformers 4.x and 5.x
        logger.warning("New tokens have been added, make sure `resize_vocab` is True.")
    return template
