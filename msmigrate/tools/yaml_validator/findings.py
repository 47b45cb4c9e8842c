"""The unit of validator output. ``code`` values are stable ids the failure catalog refers to."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass
class Finding:
    severity: Severity
    code: str  # stable id, e.g. "unknown-key", "missing-required", "bad-literal", "pattern-no-match"
    path: str  # key path in the YAML, e.g. "parallel.fsdp_plan.apply_modules[3]" ("" = whole document)
    message: str
    suggestion: str | None = None
    line: int | None = None  # 1-based line in the YAML text, when known

    def to_dict(self) -> dict:
        return asdict(self)


def join_path(parent: str, key: object) -> str:
    return f"{parent}.{key}" if parent else str(key)
