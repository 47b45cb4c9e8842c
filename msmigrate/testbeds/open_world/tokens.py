"""The family's special tokens, read from its own processor class, and a tiny tokenizer that knows them.

Three sources, all the family's own: the processor's ``__init__`` defaults for ``*_token`` parameters (the image
token it expands), the tokenizer attributes the processor module reads (``tokenizer.image_token`` …, which a real
checkpoint's tokenizer carries as named special tokens) with the literal the module falls back to, and any
special-token-shaped string literal in the processor module (``<|vision_start|>``, ``[IMG_BREAK]`` …). Config fields
that hold token ids (``image_token_id`` …) are pointed at the same tokens afterwards (``bind_token_ids``).
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass, field

# <...> / <|...|> / [...] literals of the shape special tokens have; generic words in brackets are excluded by the
# requirement of an upper-case-or-underscore body for [...] and no spaces anywhere
_SPECIAL = re.compile(r"^(<\|?[A-Za-z0-9_:/.\-]{1,40}\|?>|\[[A-Z0-9_/]{2,30}\])$")
_NOT_TOKENS = {"<s>", "</s>", "<unk>", "<pad>", "<bos>", "<eos>", "<br>", "<p>", "</p>"}
_CHATML = ("<|im_start|>", "<|im_end|>")


@dataclass
class FamilyTokens:
    """``named``: tokenizer attribute -> token (``image_token`` -> ``<image>``); ``extra``: other special tokens
    the processor module writes; bos/eos/pad as the family spells them where the module shows it."""

    named: dict[str, str] = field(default_factory=dict)
    extra: list[str] = field(default_factory=list)
    bos: str | None = "<s>"
    eos: str = "</s>"
    pad: str = "<pad>"

    def all(self) -> list[str]:
        return list(dict.fromkeys([*self.named.values(), *self.extra]))


def _string_literals(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _vocab_lookups(source: str) -> list[str]:
    """Literals the module looks up in the tokenizer's vocabulary (``vocab["|SPEAKER|"]``,
    ``convert_tokens_to_ids("<x>")``): a checkpoint's tokenizer has them whatever their shape."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str) and "vocab" in ast.unparse(node.value).lower():
            found.append(node.slice.value)
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("convert_tokens_to_ids") \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            found.append(node.args[0].value)
    return [t for t in found if t and " " not in t]


def _attr_fallbacks(source: str) -> dict[str, str]:
    """``tokenizer.X_token`` reads and the literal each falls back to: ``getattr(tokenizer, "X", "<lit>")`` or
    ``tokenizer.X if hasattr(tokenizer, "X") else "<lit>"``."""
    out: dict[str, str] = {}
    for m in re.finditer(r"getattr\(\s*tokenizer\s*,\s*[\"'](\w+_token)[\"']\s*,\s*[\"']([^\"']+)[\"']", source):
        out.setdefault(m.group(1), m.group(2))
    for m in re.finditer(r"tokenizer\.(\w+_token)\s+if\s+hasattr\([^)]*\)\s+else\s+[\"']([^\"']+)[\"']", source):
        out.setdefault(m.group(1), m.group(2))
    for m in re.finditer(r"[\"']([^\"']+)[\"']\s+if\s+not\s+hasattr\(\s*tokenizer\s*,\s*[\"'](\w+_token)[\"']", source):
        out.setdefault(m.group(2), m.group(1))
    for m in re.finditer(r"getattr\(\s*tokenizer\s*,\s*[\"'](\w+_token)[\"']\s*,\s*None\s*\)", source):
        out.setdefault(m.group(1), "")  # read where the tokenizer has it: a checkpoint's does (no literal given)
    for m in re.finditer(r"tokenizer\.(\w+_token)\b(?!_id)", source):
        out.setdefault(m.group(1), "")
    return out


def family_tokens(processor_cls) -> FamilyTokens:
    """Read the special tokens of ``processor_cls`` (a ProcessorMixin subclass) from its signature and module."""
    found = FamilyTokens()
    defaults: dict[str, str] = {}
    for name, param in inspect.signature(processor_cls.__init__).parameters.items():
        if name.endswith("_token") and isinstance(param.default, str) and param.default:
            defaults[name] = param.default
    try:
        source = inspect.getsource(inspect.getmodule(processor_cls))
    except (OSError, TypeError):
        source = ""
    own = set(re.findall(r"if\s+not\s+hasattr\(\s*tokenizer\s*,\s*[\"'](\w+_token)[\"']\s*\)\s*:", source))
    for name, literal in _attr_fallbacks(source).items():
        if name in own:  # the processor makes this token itself (an AddedToken) where the tokenizer has none
            continue
        if re.search(rf"tokenizer\.{name}\s*=\s*(True|False)\b", source):  # a flag (add_bos_token), no token
            continue
        if name in ("bos_token", "eos_token", "pad_token", "unk_token", "sep_token", "cls_token", "mask_token"):
            continue
        token = defaults.pop(name, None) or literal or f"<|{name.removesuffix('_token')}|>"
        found.named[name] = token
    for name, token in defaults.items():
        found.named.setdefault(name, token)
    literals = [s for s in _string_literals(source) if _SPECIAL.match(s) and s not in _NOT_TOKENS]
    literals += [s for s in _vocab_lookups(source) if s not in _NOT_TOKENS]
    found.extra = [s for s in dict.fromkeys(literals) if s not in found.named.values()]
    if all(t in found.extra for t in _CHATML):
        found.bos, found.eos, found.pad = None, "<|im_end|>", "<|endoftext|>"
    return found


_TOKEN_FIELD = re.compile(r"^(\w+)_(token_id|token_index|id)$")
_SPECIAL_FIELDS = {"bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "sep_token_id",
                   "unk_token_id"}


def _config_fields(cfg, keep) -> list[tuple[object, str]]:
    """(config, field) of every field of the config tree (sub-configs walked) for which ``keep(key, value)``."""
    from transformers import PretrainedConfig

    out, todo = [], [cfg]
    while todo:
        node = todo.pop()
        for key, value in vars(node).items():
            if isinstance(value, PretrainedConfig):
                todo.append(value)
            elif not key.startswith("_") and _TOKEN_FIELD.match(key) and keep(key, value):
                out.append((node, key))
    return out


def token_fields(cfg) -> list[tuple[object, str]]:
    """(config, field) of every int / int-list field of the tree that holds a token id."""
    return _config_fields(cfg, lambda key, value: key != "model_id" and (
        isinstance(value, int) and not isinstance(value, bool)
        or isinstance(value, list) and value and all(isinstance(v, int) for v in value)))


def token_for_field(key: str, named: dict[str, str]) -> str | None:
    """The named token a config field points at: ``image_token_id`` / ``image_token_index`` -> ``image_token``."""
    stem = _TOKEN_FIELD.match(key).group(1)
    stem = stem.removesuffix("_token")
    return named.get(f"{stem}_token")


def fresh_token(key: str) -> str:
    """A new special token for a config token field no processor token matches (``boi_token_id`` -> ``<|boi|>``)."""
    stem = _TOKEN_FIELD.match(key).group(1).removesuffix("_token")
    return f"<|{stem}|>"


def unset_token_fields(cfg) -> list[tuple[object, str]]:
    """(config, field) of every token-id field of the tree that the family's defaults leave None."""
    return _config_fields(cfg, lambda key, value: value is None and key not in _SPECIAL_FIELDS)
