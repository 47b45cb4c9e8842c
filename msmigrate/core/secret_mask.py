"""Secret masking by value: every configured secret, and the value of every environment variable whose name looks
like a credential, is replaced by ``***`` wherever msmigrate writes text — artifacts, logs, journals, commit
messages, checkpoints and prompts.

Patterns miss keys that are not shaped like ``sk-…``; values do not. The registry holds the literal values (this
process only, never written anywhere); ``mask_text`` replaces each occurrence, longest first, so a secret that
contains another is masked whole. Short values (< ``MIN_SECRET_CHARS``) are not registered from the environment —
``HCCL_AUTH=1`` would otherwise mask every "1" — but an explicitly configured secret of any non-trivial length is.
A value-shaped pattern pass (``sk-…``, ``Bearer …``) stays as a second net for keys that were never in this
process's environment (a key echoed back by a server, say).
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from typing import Any, Iterable, Mapping


# A variable name that may hold a credential. The few names children need that match it (TOKENIZERS_PARALLELISM)
# are exempted by ``subprocess_env``'s exact allow-list, which wins over this pattern.
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|"
                         r"CERT|SIGNATURE|DSN|WEBHOOK)", re.I)
NOT_SECRET_NAMES = frozenset({"TOKENIZERS_PARALLELISM"})


def looks_secret(name: str) -> bool:
    return name not in NOT_SECRET_NAMES and bool(SECRET_NAME.search(name))

MASK = "***"
MIN_SECRET_CHARS = 6
_VALUE_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9._\-~+/]{8,}=*)")
_NOT_SECRET_VALUES = {"EMPTY", "none", "None", "null", "true", "false", "True", "False"}

_lock = threading.Lock()
_values: set[str] = set()
_pattern: re.Pattern[str] | None = None


def register_secret(value: str | None, *, min_chars: int = 4) -> None:
    """Add one literal secret value (an API key from the spec, a token from a config file)."""
    global _pattern
    if not value or not isinstance(value, str) or value in _NOT_SECRET_VALUES or len(value) < min_chars:
        return
    with _lock:
        if value not in _values:
            _values.add(value)
            _pattern = None


def register_env_secrets(env: Mapping[str, str] | None = None) -> int:
    """Register the values of every variable in ``env`` (default ``os.environ``) whose name looks secret."""
    n = 0
    for name, value in (os.environ if env is None else env).items():
        if looks_secret(name) and value and len(value) >= MIN_SECRET_CHARS:
            register_secret(value, min_chars=MIN_SECRET_CHARS)
            n += 1
    return n


def registered() -> frozenset[str]:
    return frozenset(_values)


def _compiled() -> re.Pattern[str] | None:
    global _pattern
    with _lock:
        if _pattern is None and _values:
            _pattern = re.compile("|".join(re.escape(v) for v in sorted(_values, key=len, reverse=True)))
        return _pattern


def mask_text(text: str) -> str:
    if not isinstance(text, str) or not text:
        return text
    pat = _compiled()
    if pat is not None:
        text = pat.sub(MASK, text)
    return _VALUE_SHAPES.sub(MASK, text)


def contains_secret(text: str) -> bool:
    pat = _compiled()
    return bool(pat is not None and isinstance(text, str) and pat.search(text))


def mask_obj(obj: Any) -> Any:
    """A copy of ``obj`` with every string masked: dicts (keys too), lists, tuples, sets, pydantic models (LangChain
    messages) and dataclasses are walked; anything else is returned unchanged."""
    if isinstance(obj, str):
        return mask_text(obj)
    if isinstance(obj, dict):
        return {mask_obj(k): mask_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        walked = [mask_obj(v) for v in obj]
        return walked if isinstance(obj, list) else type(obj)(walked)
    if hasattr(obj, "model_copy") and hasattr(type(obj), "model_fields"):  # pydantic v2 (LangChain messages)
        update = {name: mask_obj(getattr(obj, name)) for name in type(obj).model_fields if hasattr(obj, name)}
        return obj.model_copy(update=update)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: mask_obj(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                                           if f.init})
    return obj


def mask_mapping_by_name(env: Mapping[str, str]) -> dict[str, str]:
    """An environment for a journal: secret-named values hidden, every other value masked by value."""
    return {k: (MASK if looks_secret(k) and v else mask_text(v)) for k, v in env.items()}


def register_all(values: Iterable[str | None] = ()) -> None:
    """Start of a run: the environment's secret-named values plus the explicitly configured ones."""
    register_env_secrets()
    for v in values:
        register_secret(v)
