"""Which entry point reads a config, and which keys that entry point reads beyond the argument models.

The generic trainer (``mindspeed_mm/fsdp/train/trainer.py``) ignores undeclared keys; task entry points
(``mindspeed_mm/fsdp/tasks/funasr/trainer.py``, ``tasks/cosyvoice3/train.py`` …) parse the same argument models and
then read more keys themselves (``args.training.max_epochs``). The entry point is the Python file the example's
launch script hands to torchrun/python next to the config; the keys it reads are the attribute names and string
constants in its folder's code (AST, never imported)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from msmigrate.core.python_files import folder_modules

GENERIC_TRAINER = "mindspeed_mm/fsdp/train/trainer.py"
_LAUNCH = re.compile(r"(?:torchrun|python3?|-m\s+torch\.distributed\.run)\b[^\n]*?\s(\S+\.py)\b")


def entry_point_of(config: Path, target_root: Path) -> str | None:
    """The target-relative entry point a launch script next to ``config`` runs it with (None when none says)."""
    folder = config.parent
    if not folder.is_dir():
        return None
    scripts = sorted(folder.glob("*.sh"))
    naming = [s for s in scripts if config.name in s.read_text(errors="replace")]
    for script in naming or scripts:
        text = script.read_text(errors="replace").replace("\\\n", " ")
        for match in _LAUNCH.finditer(text):
            rel = match.group(1).lstrip("./")
            if (target_root / rel).is_file() and rel.startswith("mindspeed_mm/"):
                return rel
    return None


def names_read_by(entry: str, target_root: Path) -> set[str]:
    """Attribute names and string constants in the entry point's folder (its task package)."""
    names: set[str] = set()
    for _, tree in folder_modules((target_root / entry).parent):
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                names.add(node.value)
    return names
