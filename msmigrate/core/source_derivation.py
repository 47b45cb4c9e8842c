"""A derivation from the source's own files that failed is a fact, not an exception out of a node.

Why a catch-all here: every derivation from a source (its chat template rendered in a sandbox, its remote code read
by AST, its processor run in the target runtime, its config read as data) executes or interprets code and data the
user brought, and a published chat template can raise anything (``TypeError`` when it concatenates list-valued
content as a string). Like a tool call and a batch item, a source derivation is a boundary: what it raises is recorded
as ``could not derive <what>: <exception>`` — the plan and every phase prompt show it, so the run goes on and the
model (and the user) see what is unknown and why — and never ends the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


@dataclass
class Derived(Generic[T]):
    value: T | None
    failure: str | None = None  # "could not derive <what>: <ExceptionType>: <message>"

    @property
    def ok(self) -> bool:
        return self.failure is None


def failure_text(what: str, exc: BaseException) -> str:
    message = " ".join(str(exc).split())[:400]
    return f"could not derive {what}: {type(exc).__name__}" + (f": {message}" if message else "")


def derive(what: str, fn: Callable[..., T], *args: Any, default: T | None = None, **kwargs: Any) -> Derived[T]:
    """``fn(*args, **kwargs)``; whatever it raises becomes ``Derived(default, "could not derive <what>: …")``."""
    try:
        return Derived(fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 — the source-derivation boundary (module docstring)
        return Derived(default, failure_text(what, exc))
