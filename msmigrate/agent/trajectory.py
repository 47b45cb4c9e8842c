"""Append-only ``trajectory.jsonl``: every policy decision and every tool call/result, secrets masked.

The replay policy reads the decisions back, so the record shape is part of the contract (see ``replay.py``)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from msmigrate.core.secret_mask import mask_text

# Keys whose value is a credential. Not every key containing "token": token counts ("tokens", "total_tokens") and
# tokenizer facts ("eos_token", "media_tokens") are data the trajectory must keep.
_SECRET_KEY = re.compile(r"(api[_-]?key|secret|passw(or)?d|authorization|^token$|"
                         r"(access|auth|api|bearer|refresh|session|hf|github)[_-]?token)", re.I)


def mask(obj: Any) -> Any:
    """Mask values under secret-looking keys, and every registered secret value anywhere (``secret_mask``)."""
    if isinstance(obj, dict):
        return {k: ("***" if _SECRET_KEY.search(str(k)) and v else mask(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [mask(v) for v in obj]
    if isinstance(obj, str):
        return mask_text(obj)
    return obj


class Trajectory:
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, kind: str, **record: Any) -> None:
        line = json.dumps(mask({"t": round(time.time(), 3), "kind": kind, **record}), default=str, ensure_ascii=False)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def records(self, kind: str | None = None) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = [json.loads(ln) for ln in self.path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        return [r for r in out if kind is None or r["kind"] == kind]
