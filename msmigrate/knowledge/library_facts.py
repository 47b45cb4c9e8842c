"""Facts a failure message can be checked against in the installed libraries, not in any log: evidence that decides
between two owners where the message alone does not.

Whether a model type that transformers refused ("has model type `x` but Transformers does not
recognize this architecture", ``KeyError: 'x'`` raised by the auto-config mapping) is an architecture transformers
publishes. The installed transformers' own registry (``CONFIG_MAPPING_NAMES``) answers it; this project requires a
recent transformers, so a type it registers is one an older install merely predates (environment: a newer release
ships it), and a type it does not register is no published architecture at all but a project's own (model: its
classes must be registered or loaded as the checkpoint's code). When the checkpoint ships that code and only
``trust_remote_code`` is missing, transformers says so in another message (the trust-remote-code case), so that
owner is not one of the two here. And whether a class said to lack gradient checkpointing is one of transformers'
own (the run's option must go: config) or the project's model code (model).

A case's frontmatter ``fact: <name>`` ties it to one of :data:`FACTS`; the classifier keeps a regex hit of such a
case only when the fact holds, and then the fact, not the message alone, decides. Without transformers installed
the fact is unknown and the hit is treated like any other.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable

# How transformers names the model type it refused: the config check, and the auto mapping's KeyError right after a
# frame of configuration_auto (a bare KeyError elsewhere says nothing about model types)
_NAMED_TYPE = [
    re.compile(r"has model type `([\w.-]+)` but Transformers does not recognize this architecture"),
    re.compile(r"models/auto/configuration_auto\.py\", line \d+, in \w+\n(?:[^\n]*\n){0,2}?\s*KeyError: '([\w.-]+)'"),
]


def named_model_type(text: str) -> str | None:
    """The model type a transformers refusal in ``text`` names, or None."""
    for pattern in _NAMED_TYPE:
        found = pattern.search(text)
        if found:
            return found.group(1)
    return None


@lru_cache(maxsize=1)
def published_model_types() -> frozenset[str] | None:
    """The model types the installed transformers registers; None when transformers is not installed."""
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    except ImportError:  # the knowledge layer works without transformers; the fact is then unknown
        return None
    return frozenset(CONFIG_MAPPING_NAMES)


def transformers_version() -> str:
    try:
        import transformers
    except ImportError:
        return "not installed"
    return transformers.__version__


def model_type_published(text: str) -> tuple[bool | None, str]:
    """(True / False / None, what was checked): whether the refused model type is a published architecture."""
    name = named_model_type(text)
    known = published_model_types()
    if name is None or known is None:
        return None, ""
    published = name in known
    said = (f"model type `{name}` is {'registered' if published else 'not registered'} by transformers "
            f"{transformers_version()} (of {len(known)} model types it ships)")
    return published, said


# A class named as lacking an ability transformers checks for ("X does not support gradient checkpointing")
_NAMED_CLASS = re.compile(r"\b([A-Z]\w+) does not support gradient checkpointing")


def class_in_transformers(text: str) -> tuple[bool | None, str]:
    """(True / False / None, what was checked): whether the class a refusal names is one of transformers' own (a
    class no migration artifact changes: the option that needs it is turned off in the run) rather than the
    project's own model code."""
    found = _NAMED_CLASS.search(text)
    if found is None:
        return None, ""
    try:
        import transformers
    except ImportError:  # without transformers the fact is unknown
        return None, ""
    name = found.group(1)
    ships = hasattr(transformers, name)
    return ships, (f"`{name}` is {'a class of' if ships else 'not a class of'} the installed transformers "
                   f"{transformers.__version__}")


# A KeyError printed without the frame that raised it: its key alone names no mapping
_BARE_KEY_ERROR = re.compile(r"\bKeyError: '([\w.-]+)'")


def unplaced_key_hints(text: str) -> list[str]:
    """What the installed transformers says of a KeyError whose raising frame is not shown but whose key is one of
    its model types: the auto-config mapping of an older release raises exactly that. Not a case's fact (a model
    zoo's own dict keyed by model names raises it too), so it decides nothing; it is said to the LLM as checked."""
    known = published_model_types()
    if known is None or named_model_type(text) is not None:  # unknown, or placed (a case's fact checks it)
        return []
    names = dict.fromkeys(m.group(1) for m in _BARE_KEY_ERROR.finditer(text) if m.group(1) in known)
    return [f"the KeyError's key `{name}` is a model type that transformers registers (checked in msmigrate's own "
            f"transformers {transformers_version()}, not the failing run's): the auto-config mapping of a release "
            f"that predates `{name}` raises this KeyError (the excerpt does not show which mapping raised it)"
            for name in names]


def _negated(fact: Callable[[str], tuple[bool | None, str]]) -> Callable[[str], tuple[bool | None, str]]:
    def check(text: str) -> tuple[bool | None, str]:
        holds, said = fact(text)
        return (None if holds is None else not holds), said
    return check


FACTS: dict[str, Callable[[str], tuple[bool | None, str]]] = {
    "model-type-published": model_type_published,
    "model-type-unpublished": _negated(model_type_published),
    "class-in-transformers": class_in_transformers,
    "class-not-in-transformers": _negated(class_in_transformers),
}


def check_fact(name: str, text: str) -> tuple[bool | None, str]:
    """Evaluate fact ``name`` on the evidence ``text``: (holds, what was checked); None when it cannot be told."""
    return FACTS[name](text)
