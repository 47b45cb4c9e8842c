"""The media placeholders the target's data pipeline expands, read from its own mm_plugin module, and whether a
source's measured expansion writes one of them back.

The target's plugins expand ``<image>`` in a loop (``while IMAGE_PLACEHOLDER in content: content =
content.replace(IMAGE_PLACEHOLDER, expansion, 1)``, stand-in and real alike). A source whose own image tokens
include that very string (MiniCPM-V-style ``<image><unk>…</image>``: found on a held-out slicing VLM) makes such a
loop re-expand its own output until the image list runs out (``IndexError``). The plan says so up front.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

MM_PLUGIN = "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py"
PLACEHOLDER_RX = re.compile(r"^(IMAGE|VIDEO|AUDIO)_PLACEHOLDER\s*=\s*(?:os\.getenv\(\s*['\"]\w+['\"]\s*,\s*)?"
                            r"['\"]([^'\"]+)['\"]", re.M)


def target_placeholders(target: Path | str) -> dict[str, dict[str, Any]]:
    """``{"image": {"text": "<image>", "at": "mindspeed_mm/…/mm_plugin.py:19"}, …}``; empty when unreadable."""
    path = Path(target) / MM_PLUGIN
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    return {m.group(1).lower(): {"text": m.group(2), "at": f"{MM_PLUGIN}:{text.count(chr(10), 0, m.start()) + 1}"}
            for m in PLACEHOLDER_RX.finditer(text)}


def placeholder_collision(expansion_texts: list[str], placeholders: dict[str, dict[str, Any]]) -> str | None:
    """A plan sentence when the source's expansion of one image contains the target's image placeholder."""
    image = placeholders.get("image")
    if not image or not any(image["text"] in t for t in expansion_texts):
        return None
    return (f"the source's own expansion of an image contains the target's image placeholder {image['text']!r} "
            f"(IMAGE_PLACEHOLDER, {image['at']}): an mm_plugin that replaces it in a loop, as the target's plugins "
            f"do (`while IMAGE_PLACEHOLDER in content`), re-expands its own output; replace the placeholders in "
            f"one pass (split on it and join the expansions)")
