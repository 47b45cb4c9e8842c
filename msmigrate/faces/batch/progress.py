"""What an item is doing now, read from the tail of its run's trajectory (the item process writes it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TAIL_BYTES = 65536


def item_progress(trajectory: Path) -> dict[str, Any]:
    if not trajectory.is_file():
        return {}
    with open(trajectory, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - TAIL_BYTES))
        lines = fh.read().decode("utf-8", errors="replace").splitlines()[1 if size > TAIL_BYTES else 0:]
    phase, gates = "", {}
    for ln in lines:
        try:
            rec = json.loads(ln)
        except json.JSONDecodeError:
            continue
        phase = rec.get("phase") or phase
        if rec.get("kind") == "gate":
            gates[rec.get("gate")] = bool(rec.get("passed"))
        if rec.get("kind") == "exit":
            phase = "done"
    return {"phase": phase, "gates": [g for g, ok in sorted(gates.items()) if ok],
            "failed": [g for g, ok in sorted(gates.items()) if not ok]}
