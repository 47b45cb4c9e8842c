"""What a policy is: given the phase, the state and the phase's conversation, propose the next tool calls.

An ``AIMessage`` with no tool calls means "I believe this phase's work is done" — the phase gate (code) then decides."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import BaseTool

from msmigrate.core.run_context import RunContext
from msmigrate.tools.missing_package import install_advice


@dataclass
class PolicyView:
    phase: str
    state: dict[str, Any]
    messages: list[AnyMessage]
    tools: list[BaseTool]
    ctx: RunContext


@dataclass
class Decision:
    message: AIMessage
    tokens: int = 0
    format_errors: int = 0
    notes: dict[str, Any] = field(default_factory=dict)
    # set when the policy cannot do this phase at all (not "done, let the gate decide"): the run ends at once with
    # exit status unsupported_by_policy, and this text (what, why, what to do) heads the report
    unsupported: str | None = None
    # the policy re-decides its own phase's plan decisions (the data path after G2 refuted the one reused as it is):
    # the work node applies the keys its phase owns (``PHASE_PLAN_KEYS``) and records the revision
    plan_update: dict[str, Any] | None = None


class PhaseUnsupported(Exception):
    """Raised by a policy's phase script when the phase is beyond it; ``decide`` turns it into a Decision."""

    def __init__(self, what: str, why: str, todo: str = "run it with --policy llm"):
        super().__init__(f"{what}: {why}")
        # a reason that is a package missing from the runtime is fixed by installing it, whatever the policy
        self.what, self.why, self.todo = what, why, install_advice(why) or todo

    @property
    def line(self) -> str:
        return f"{self.what}: {self.why}. What to do: {self.todo}."


class PolicyError(RuntimeError):
    """An outage the policy cannot recover from (endpoint down after retries, replay exhausted): fails the run."""


class EndpointError(PolicyError):
    """The LLM endpoint could not be reached, refused, or answered no chat completion, after the retries: the
    user's to fix (the report says so), not a bug."""


class Policy(Protocol):
    name: str

    def decide(self, view: PolicyView) -> Decision: ...

    def classify(self, failure_text: str, view: PolicyView,
                 evidence: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Verdict when the failure catalog abstained; None = no opinion. ``evidence``: the failed gate, the
        extracted root cause (kind, text, evidence) and the closest candidate cases (case_id, owner, title, cause)."""
        ...


def call_id(prefix: str) -> str:
    """Unique ids for tool calls produced without an LLM (unique across resumes, unlike a counter)."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def tool_call(name: str, args: dict[str, Any], prefix: str = "call") -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id(prefix), "type": "tool_call"}


def write(path: str, content: str, reason: str) -> dict[str, Any]:
    """A rules-policy ``write_file`` call (here, not in the rules package: the data-branch writer shared by both
    routes uses it, and importing the rules package from there closed an import circle)."""
    return tool_call("write_file", {"path": path, "content": content, "reason": reason}, prefix="rules")
