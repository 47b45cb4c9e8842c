"""Fakes for the agent-core tests: a scripted policy, a fake tool with both failure tiers, fake gates whose outcomes
a test scripts, and a run builder. (A uniquely named module, not conftest: ``from conftest import`` is ambiguous
when several test folders with a conftest.py are collected in one session.)"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from pydantic import BaseModel, Field

from msmigrate.agent.config import Budgets, RunSpec, Settings
from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.agent.policies.base import Decision, PolicyView, tool_call
from msmigrate.core.tool_result import ToolResult, make_tool

MODEL = "fakevl"
GATE_NAMES = ("G1", "G2", "G3", "G4", "G5", "G6")
# A failure text the knowledge catalog maps (regex, priority > wrapper) to owner "config".
CONFIG_FAILURE = "RuntimeError: [FSDP2] No module named ['blocks.{*}']."


# --- a fake tool with both failure tiers ---------------------------------------------------------------------------

class EchoArgs(BaseModel):
    text: str = Field(description="text to echo back; 'fail' gives an expected failure, 'boom' raises (a bug)")
    times: int = Field(1, ge=1, description="how often to repeat the text")


def echo_core(text: str, times: int = 1) -> ToolResult:
    if text == "boom":
        raise RuntimeError("echo tool bug: boom")
    if text == "fail":
        return ToolResult.failure("echo refused the text 'fail'", text=text)
    return ToolResult.success(echo=text * times)


def echo_tool():
    return make_tool("echo", "Echo a text back (test tool).", EchoArgs, echo_core)


def echo(text: Any = "hi", **extra: Any) -> dict[str, Any]:
    args = {"text": text, **extra} if text is not None else dict(extra)
    return tool_call("echo", args, prefix="test")


# --- a scripted policy --------------------------------------------------------------------------------------------

class ScriptedPolicy:
    """Per phase a list of decisions (each a list of tool calls); the step is the number of decisions already in the
    phase conversation, and past the end of the list the phase is declared done (no tool calls). ``loop=True``
    proposes a call forever (for the budget tests). Every view is kept so tests can inspect observations."""

    name = "scripted"

    def __init__(self, script: dict[str, list[list[dict[str, Any]]]] | None = None, *, loop: bool = False,
                 tokens: int = 5):
        self.script = script or {}
        self.loop = loop
        self.tokens = tokens
        self.views: list[PolicyView] = []

    def decide(self, view: PolicyView) -> Decision:
        self.views.append(view)
        if self.loop:
            return Decision(message=AIMessage(content="again", tool_calls=[echo("x")]), tokens=self.tokens)
        step = sum(isinstance(m, AIMessage) for m in view.messages)
        steps = self.script.get(view.phase, [])
        if step < len(steps):
            calls = [{**c, "id": f"{c['id']}_{view.phase}_{step}"} for c in steps[step]]
            return Decision(message=AIMessage(content=f"{view.phase} step {step}", tool_calls=calls), tokens=self.tokens)
        return Decision(message=AIMessage(content=f"{view.phase} done"), tokens=self.tokens)

    def classify(self, failure_text: str, view: PolicyView,
                 evidence: dict[str, Any] | None = None) -> dict[str, Any] | None:
        return None

    def tool_messages(self, phase: str) -> list[ToolMessage]:
        return [m for v in self.views if v.phase == phase for m in v.messages if isinstance(m, ToolMessage)]


# --- fake gates ---------------------------------------------------------------------------------------------------

class FakeGates:
    """Gate outcomes scripted per gate: a list of failure texts (None = pass) consumed one per call; the gate
    passes once its list is used up. Records the call order."""

    def __init__(self, outcomes: dict[str, list[str | None]] | None = None):
        self.outcomes = {k: list(v) for k, v in (outcomes or {}).items()}
        self.calls: list[str] = []
        self.count: dict[str, int] = defaultdict(int)

    def gate(self, name: str):
        def run(deps, state) -> dict[str, Any]:
            self.calls.append(name)
            self.count[name] += 1
            queue = self.outcomes.get(name, [])
            failure = queue.pop(0) if queue else None
            started = time.time()
            metrics = {"losses": [2.0, 1.8, 1.7], "steps": 3, "first_loss": 2.0, "last_loss": 1.7} \
                if name in ("G4", "G6") and failure is None else {}
            ev = evidence_item(f"fake {name}", ["true"], 0 if failure is None else 1, started, time.time(),
                               failure or f"{name} ok", metrics)
            return {"gate": name, "passed": failure is None, "summary": f"fake {name}: {failure or 'ok'}",
                    "evidence": [ev], "failure_text": failure or "", "launches": 1 if name in ("G4", "G5", "G6") else 0}

        return run

    def as_dict(self) -> dict[str, Any]:
        return {g: self.gate(g) for g in GATE_NAMES}


# --- building a run -----------------------------------------------------------------------------------------------

def make_spec(ws: dict[str, Any], **over: Any) -> RunSpec:
    budgets = over.pop("budgets", {})
    return RunSpec(source=ws["source"], target=ws["target"], model_name=MODEL, policy="rules",
                   budgets=Budgets(**budgets), **over)


_counter = [0]


def make_run(ws, tmp_path: Path, policy, gates: FakeGates | None = None, tools: list | None = None, **spec_over):
    from msmigrate.agent.runner import Run

    _counter[0] += 1
    run_id = f"t{_counter[0]}-{int(time.time() * 1000) % 100000}"
    settings = Settings(runs_dir=tmp_path / "runs", runtime_python=sys.executable)
    gates = gates or FakeGates()
    return Run(make_spec(ws, **spec_over), run_id, settings, policy=policy,
               tools=tools if tools is not None else [echo_tool()], gates=gates.as_dict())
