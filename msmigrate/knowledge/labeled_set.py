"""The labeled failure-log set used to measure the classifier (files in ``evals/labeled/*.yaml`` at the root of a
source checkout: evaluation data, not shipped in the package).

Each file: ``expected_case`` (a failure-case id), ``expected_owner`` (model/data/config/environment), ``source``
(where the message is documented) and ``log`` (a log tail: the real message inside realistic surrounding output).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from msmigrate.knowledge.real_log_corpus import EVALS_DIR

LABELED_DIR = EVALS_DIR / "labeled"


@dataclass(frozen=True)
class LabeledLog:
    name: str
    expected_case: str
    expected_owner: str
    source: str
    log: str


def load_labeled(folder: Path | str | None = None) -> list[LabeledLog]:
    folder = Path(folder) if folder else LABELED_DIR
    if not folder.is_dir():
        raise FileNotFoundError(f"no labeled set at {folder}: it lives in a source checkout (evals/labeled)")
    samples = []
    for path in sorted(folder.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        samples.append(LabeledLog(name=path.stem, expected_case=data["expected_case"],
                                  expected_owner=data["expected_owner"], source=data.get("source", ""),
                                  log=data["log"]))
    return samples
