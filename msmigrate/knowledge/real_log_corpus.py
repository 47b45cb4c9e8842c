"""The real-log corpus: verbatim failure excerpts and healthy logs from public issue threads (``evals/real_logs/`` at
the root of a source checkout: evaluation data, not shipped in the package; only ``split_of`` runs inside a migration,
where the catalog checks that its real examples come from the tuning half).

Unlike ``evals/labeled`` (logs written around catalog messages by the people who wrote the patterns), this
corpus is collected from other projects' public threads (MindSpeed, torch_npu, transformers, PyTorch, LLaMA-Factory,
ms-swift, vLLM(-Ascend), DeepSpeed, ...). Each file holds one excerpt, verbatim, with its source URL and an owner
label decided from the thread's resolution (``basis: resolution``) or, for threads without one, from what the
message itself says (``basis: message``). Owners follow :mod:`msmigrate.knowledge.owners`.

The split into a **tuning** half and a **held-out** half is a fixed function of the source URL (first byte of its
SHA-256, parity), decided before any pattern or threshold was fitted. Nothing may be fitted on the held-out half:
catalog patterns and examples come from the tuning half only, and the BM25 acceptance threshold is calibrated on it
(``scripts/calibrate_classifier.py``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml

from msmigrate.knowledge.owners import OWNERS

EVALS_DIR = Path(__file__).resolve().parents[2] / "evals"  # a source checkout's evaluation data
CORPUS_DIR = EVALS_DIR / "real_logs"
Split = Literal["tuning", "heldout"]


def split_of(source: str) -> Split:
    """The half a source belongs to: a property of its URL alone, so it cannot drift with tuning."""
    return "heldout" if hashlib.sha256(source.encode("utf-8")).digest()[0] % 2 else "tuning"


@dataclass(frozen=True)
class RealLog:
    name: str
    source: str
    log: str
    owner: str | None  # None for a healthy log
    basis: str = ""
    resolution: str = ""
    round: int = 1  # collection round: round 2 was collected after round 1's held-out half had been measured;
    # round 4 was labelled and committed before any of it was scored (its tuning half may then feed the catalog)

    @property
    def split(self) -> Split:
        return split_of(self.source)

    @property
    def healthy(self) -> bool:
        return self.owner is None


def _load(path: Path, healthy: bool) -> RealLog:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    owner = None if healthy else data["owner"]
    if owner is not None and owner not in OWNERS:
        raise ValueError(f"{path}: owner must be one of {OWNERS}, got {owner!r}")
    return RealLog(name=path.stem, source=data["source"], log=data["log"], owner=owner,
                   basis=data.get("basis", ""), resolution=data.get("resolution", data.get("note", "")),
                   round=int(data.get("round", 1)))


def load_corpus(split: Split | None = None, folder: Path | None = None) -> list[RealLog]:
    """All corpus entries (failures then healthy logs), optionally only one half."""
    folder = folder or CORPUS_DIR
    if not folder.is_dir():
        raise FileNotFoundError(f"no real-log corpus at {folder}: it lives in a source checkout (evals/real_logs)")
    entries = [_load(p, healthy=False) for p in sorted((folder / "failures").glob("*.yaml"))]
    entries += [_load(p, healthy=True) for p in sorted((folder / "healthy").glob("*.yaml"))]
    return [e for e in entries if split is None or e.split == split]
