"""Reading the YAML a user hands msmigrate (a run spec, a batch manifest): bounded, and strict about duplicate keys.

- **Size**: a spec is a few hundred bytes; a file over ``MAX_USER_YAML_BYTES`` is refused before it is parsed (a
  60 MB spec otherwise keeps the parser busy for minutes with no output). The file is read through a bounded read,
  so a FIFO or ``/dev/zero`` given as the spec ends too.
- **Duplicate keys**: PyYAML keeps the last of two equal keys silently; a spec with ``policy:`` twice would run
  with whichever came last. Here the second one is an error naming the key and both lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.resolver import BaseResolver

MAX_USER_YAML_BYTES = 1_000_000


def read_bounded(path: Path | str, limit: int = MAX_USER_YAML_BYTES, what: str = "file") -> str:
    """The text of ``path``; ValueError (one line) when it holds more than ``limit`` bytes or is not UTF-8."""
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{what} {path} is larger than {limit:,} bytes; a {what} is a short YAML file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} {path} is not UTF-8 text (byte {exc.start})") from None


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping with the same key twice."""


def _construct_unique_mapping(loader: UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # '<<' merge keys may repeat; their contents are checked too
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: SafeLoader refuses it below with its own message
            continue
        line = key_node.start_mark.line + 1
        if first is not None:
            raise ConstructorError(None, None, f"duplicate key {key!r} at line {line} (first at line {first}); "
                                   "each key may appear once", key_node.start_mark)
        seen[key] = line
    return loader.construct_mapping(node, deep=deep)


UniqueKeyLoader.add_constructor(BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def load_user_yaml(text: str) -> Any:
    """``yaml.safe_load`` with duplicate keys refused (ValueError naming the key; also for invalid YAML)."""
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 — a SafeLoader subclass
    except ConstructorError as exc:
        if exc.problem and exc.problem.startswith("duplicate key"):
            raise ValueError(exc.problem) from None
        raise ValueError(f"not valid YAML: {' '.join(str(exc).split())}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"not valid YAML: {' '.join(str(exc).split())}") from None


def load_user_yaml_file(path: Path | str, what: str = "spec") -> Any:
    """A user's YAML file, bounded and strict (ValueError with one line; OSError when it cannot be opened)."""
    return load_user_yaml(read_bounded(path, what=what))
