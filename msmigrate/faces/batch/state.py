"""The batch's own durable record (``batch_state.json``): per item its status, run id, attempt and result.

Written atomically (temp file + rename) after every change, so a batch killed at any moment restarts from it:
``done`` items are skipped, ``running`` and ``interrupted`` ones are resumed from their run's checkpoint — by the
run id recorded here, the only way a batch ever resumes a run.

Run ids are ``<item>-<attempt>-<random>``, drawn once per attempt and kept here: a second batch on the same target
(another batch folder, the same manifest) never meets the first batch's ``msmigrate/<run id>`` branches."""

from __future__ import annotations

import json
import os
import secrets
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ItemState:
    id: str
    status: str = "pending"  # pending | running | interrupted (Ctrl-C: resumed by a re-run) | done
    attempt: int = 1
    run: str = ""  # the run id of this attempt, drawn when it is first scheduled (empty in older state files)
    exit_status: str | None = None
    exit_detail: str = ""
    started: float | None = None
    ended: float | None = None
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.run or f"{self.id}-{self.attempt}"  # older state files: the id their runs were started with


def new_item_run_id(item_id: str, attempt: int) -> str:
    """Unique across batches: the item id (≤ 48 characters) and attempt, then 32 random bits."""
    return f"{item_id}-{attempt}-{secrets.token_hex(4)}"


class BatchState:
    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self.items: dict[str, ItemState] = {}
        if path.is_file():
            raw = json.loads(path.read_text())
            self.items = {k: ItemState(**v) for k, v in raw.get("items", {}).items()}

    def get(self, item_id: str) -> ItemState:
        with self._lock:
            return self.items.setdefault(item_id, ItemState(item_id))

    def update(self, item_id: str, **changes: Any) -> ItemState:
        with self._lock:
            st = self.items.setdefault(item_id, ItemState(item_id))
            for k, v in changes.items():
                setattr(st, k, v)
            self._save()
            return st

    def save(self) -> None:
        with self._lock:
            self._save()

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"items": {k: asdict(v) for k, v in self.items.items()}}, indent=2, default=str))
        os.replace(tmp, self.path)
