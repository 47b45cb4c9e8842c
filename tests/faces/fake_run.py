"""A scripted policy and recorded-shape gates for testing the faces without the rules policy or real launches.

Used in-process by the tests and, through the ``MSMIGRATE_RUN_HOOK=fake_run:overrides`` test hook, by the chat and
batch subprocesses (``tests/faces`` is put on PYTHONPATH)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.agent.policies.base import Decision, PolicyView, tool_call
from msmigrate.tools.file_writer import file_writer_tools

PLUGIN = ('"""Plugin of {name} (test)."""\nfrom mindspeed_mm.fsdp.utils.register import model_register\n\n\n'
          '@model_register.register("{name}")\nclass Model:\n    pass\n')
BUILDER = 'def build(config):\n    return config  # {name}\n'


def config_text(target, name: str) -> str:
    """The stand-in's Qwen3-VL example re-pointed at this model (valid for the real validator); FAKE_WEAKEN=1
    shrinks train_iters to 1 (a weakened config the scorers must catch)."""
    text = (target / "examples/qwen3vl/qwen3vl_config.yaml").read_text()
    text = (text.replace("model_id: qwen3_vl", f"model_id: {name}").replace("template: qwen3_vl_nothink", "template: qwen2vl")
            .replace("mindspeed_mm/fsdp/models/qwen3vl", f"mindspeed_mm/fsdp/models/{name}"))
    return text.replace("train_iters: 6", "train_iters: 1") if os.environ.get("FAKE_WEAKEN") == "1" else text


class ScriptedPolicy:
    """Per phase: one decision with the phase's writes, then 'done' (no tool calls)."""

    name = "scripted"

    def __init__(self, name: str):
        self.model = name

    def _writes(self, phase: str, target) -> list[tuple[str, str]]:
        name = self.model
        if phase == "model":
            return [(f"mindspeed_mm/fsdp/models/{name}/__init__.py", PLUGIN.format(name=name)),
                    (f"mindspeed_mm/fsdp/models/{name}/builder.py", BUILDER.format(name=name))]
        if phase == "config":
            return [(f"examples/{name}/{name}_config.yaml", config_text(target, name))]
        return []

    def decide(self, view: PolicyView) -> Decision:
        writes = self._writes(view.phase, view.ctx.target)
        if any(isinstance(m, ToolMessage) for m in view.messages) or not writes:
            return Decision(message=AIMessage(content=f"{view.phase} done"), tokens=7)
        calls = [tool_call("write_file", {"path": p, "content": c, "reason": f"{view.phase} step"})
                 for p, c in writes]
        return Decision(message=AIMessage(content=f"writing the {view.phase} files", tool_calls=calls), tokens=11)

    def classify(self, failure_text: str, view: PolicyView) -> dict[str, Any] | None:
        return None


def _wait_for_release(release: Path, gate: str, limit_s: float = 120.0) -> None:
    """FAKE_GATE_HOLD=PATH: the slow gates stay "in flight" until the test creates PATH, so a test that must act
    while a step runs (Ctrl-C in the chat) is not racing a fixed sleep on a loaded machine. Bounded, so a test that
    never releases fails on its own timeout instead of hanging the suite."""
    deadline = time.monotonic() + limit_s
    while not release.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"fake {gate}: {release} was not created within {limit_s:.0f} s")
        time.sleep(0.05)


def held_marker(hold_dir: Path, run_id: str, gate: str) -> Path:
    """Written by a slow gate of run ``run_id`` once it is in flight and waiting (FAKE_GATE_HOLD_DIR)."""
    return hold_dir / f"{run_id}.{gate}.held"


def release_file(hold_dir: Path, run_id: str | None = None) -> Path:
    """Created by the test to let the held gates of ``run_id`` (or, without one, of every run) go on."""
    return hold_dir / (f"{run_id}.release" if run_id else "all.release")


def _hold_in_dir(hold_dir: Path, run_id: str, gate: str, limit_s: float = 240.0) -> None:
    """FAKE_GATE_HOLD_DIR=DIR: per-run holds for tests with several runs in flight (batch kill/resume, concurrent
    runs on one target). The gate says it is held (``held_marker``), then waits for its run's release file or the
    common one. The test waits for the markers it needs instead of guessing how long a sleep keeps a window open."""
    hold_dir.mkdir(parents=True, exist_ok=True)
    held_marker(hold_dir, run_id, gate).write_text(str(os.getpid()))
    deadline = time.monotonic() + limit_s
    while not (release_file(hold_dir, run_id).exists() or release_file(hold_dir).exists()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"fake {gate} of {run_id}: no release in {hold_dir} within {limit_s:.0f} s")
        time.sleep(0.05)


def _gate(name: str):
    def gate(deps, state) -> dict:
        started = time.time()
        slow = name in os.environ.get("FAKE_SLOW_GATES", "G4").split(",")
        hold = os.environ.get("FAKE_GATE_HOLD")
        if hold and slow:
            _wait_for_release(Path(hold), name)
        hold_dir = os.environ.get("FAKE_GATE_HOLD_DIR")
        if hold_dir and slow:
            _hold_in_dir(Path(hold_dir), state["run_id"], name)
        fail = name in os.environ.get("FAKE_FAIL_GATES", "").split(",")
        ev = evidence_item(f"fake {name}", ["true"], 1 if fail else 0, started, time.time(), f"{name} log",
                           {"losses": [2.0, 1.9, 1.8]} if name in ("G4", "G6") else {})
        kind = {"G1": "model", "G2": "data", "G6": "sharded"}.get(name)
        return {"gate": name, "passed": not fail, "summary": f"fake {name} {'failed' if fail else 'ok'}",
                "evidence": [ev], "failure_text": f"{name} failed on purpose" if fail else "",
                "parity": {kind: {"status": "fail" if fail else "pass", "problems": []}} if kind else {}}

    return gate


def fake_gates() -> dict:
    return {g: _gate(g) for g in ("G0", "G1", "G2", "G3", "G4", "G5", "G6")}


def overrides(spec, run_id: str, settings) -> dict:
    """The MSMIGRATE_RUN_HOOK factory: the Run keyword arguments replacing policy, tools and gates."""
    # tools as a factory: the Run binds them to its own context (the one pointing at the run's worktree)
    return {"policy": ScriptedPolicy(spec.model_name), "tools": file_writer_tools, "gates": fake_gates()}

