"""Where a folder's declared processor class is defined, read statically (no import, no trust_remote_code).

Checkpoints whose processor ships outside transformers name it in ``processor_config.json`` /
``preprocessor_config.json`` / ``tokenizer_config.json`` (``processor_class``) and may carry its code as a ``.py``
file that no ``auto_map`` entry points to (DeepSeek-VL2-style: the processor lives in the inference package, the
folder says its name). AutoProcessor then returns a bare tokenizer, and the plan used to say only "the folder
declares no image processor", although the class that makes the pixels and expands the placeholder is right there.
This module finds it: the declaring file, the defining file and line, and whether an ``auto_map`` reaches it.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

DECLARING_FILES = ("processor_config.json", "preprocessor_config.json", "tokenizer_config.json")


def json_object(path: Path) -> dict[str, Any]:
    """A JSON file's object; empty where the file is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def declared_processor_code(folder: Path | str) -> dict[str, Any] | None:
    """``{class, declared_in, defined_in, line, methods, auto_map_reaches}`` for the first declared processor class,
    or None when no file declares one. ``defined_in`` is None when no top-level ``.py`` file of the folder defines
    it (a transformers class, or code the folder does not ship)."""
    folder = Path(folder)
    name, declared_in, reached = None, None, False
    for fname in DECLARING_FILES:
        value = json_object(folder / fname).get("processor_class")
        if isinstance(value, str) and value and name is None:
            name, declared_in = value, fname
    if name is None:
        return None
    for fname in DECLARING_FILES + ("config.json",):  # any file's auto_map may reach it
        auto = json_object(folder / fname).get("auto_map") or {}
        if isinstance(auto, dict) and any(str(v).split(".")[-1] == name for v in auto.values()):
            reached = True
    for path in sorted(folder.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                methods = [n.name for n in node.body if isinstance(n, ast.FunctionDef)]
                return {"class": name, "declared_in": declared_in, "defined_in": path.name, "line": node.lineno,
                        "methods": methods[:12], "auto_map_reaches": reached}
    return {"class": name, "declared_in": declared_in, "defined_in": None, "line": None, "methods": [],
            "auto_map_reaches": reached}


def describe_unreached(code: dict[str, Any] | None) -> str | None:
    """A plan sentence for a processor class the folder defines but AutoProcessor cannot reach; else None."""
    if not code or not code.get("defined_in") or code.get("auto_map_reaches"):
        return None
    return (f"the folder's own {code['class']} ({code['defined_in']}:{code['line']}, named by {code['declared_in']}; "
            f"no auto_map entry reaches it, so AutoProcessor cannot load it) is the source's processor: read it for "
            f"how pixels are made and how the placeholder expands (methods {', '.join(code['methods'])})")


def describe_unmeasured(code: dict[str, Any] | None) -> str | None:
    """A plan sentence for a remote-code processor the media-expansion probe could not measure (it renders the chat
    template and calls ``processor(text=…, images=…)``; Molmo-style processors expand images in a method of their
    own, e.g. ``process``, and ship no chat template): where its code is, and the methods it defines."""
    if not code or not code.get("defined_in"):
        return None
    own = [m for m in code.get("methods") or [] if not m.startswith("_")]
    return (f"the source's {code['class']} is remote code ({code['defined_in']}:{code['line']}"
            + (f"; its own methods: {', '.join(own)}" if own else "")
            + "): what the probe's `processor(text=..., images=...)` could not show — the call that expands an "
              "image into tokens, the prompt format — is in that code; read it")
