"""Start, resume and drive one migration run: run dir, checkpointer (thread id = run id), policy, tools, gates.

This is one of the two boundaries allowed a catch-all: a bug anywhere in a run ends it with ``exit_status: error``
and the traceback in the trajectory, never a crash of the caller (the batch face relies on it)."""

from __future__ import annotations

import difflib
import os
import secrets
import sqlite3
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import yaml
from langgraph.checkpoint.sqlite import SqliteSaver
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command

from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.deps import RunDeps
from msmigrate.agent.graph import build_graph
from msmigrate.agent.masked_serde import MaskingSerializer
from msmigrate.agent.policies.base import Policy
from msmigrate.agent.state import EXIT_ERROR
from msmigrate.agent.trajectory import Trajectory
from msmigrate.core.run_context import RunContext
from msmigrate.tools.warm_runtime import POOL
from msmigrate.core.tool_result import ToolResult
from msmigrate.core.secret_mask import mask_text, register_all
from msmigrate.tools.subprocess_env import set_passthrough
from msmigrate.tools.worktree import WorktreeError, attach, release_worktree

Approver = Callable[[dict[str, Any]], Any]


def new_run_id(model_name: str) -> str:
    return f"{model_name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def build_policy(spec: RunSpec, settings: Settings) -> Policy:
    if spec.policy == "rules":
        from msmigrate.agent.policies.rules import RulesPolicy

        return RulesPolicy()
    if spec.policy == "none":
        from msmigrate.agent.policies.gates_only import GatesOnlyPolicy

        return GatesOnlyPolicy()
    if spec.policy == "replay":
        from msmigrate.agent.policies.replay import ReplayPolicy

        if spec.replay_trajectory is None:
            raise ValueError("policy 'replay' needs replay_trajectory in the spec")
        return ReplayPolicy(spec.replay_trajectory)
    from msmigrate.agent.policies.llm import LLMPolicy, build_chat_model, knowledge_brief
    from msmigrate.knowledge.catalog import load_catalog

    return LLMPolicy(build_chat_model(spec.llm, settings), spec.llm, knowledge_brief(load_catalog()))


def build_tools(ctx: RunContext) -> list:
    from msmigrate.knowledge.retrieval import read_knowledge_tool, search_knowledge_tool
    from msmigrate.tools.file_writer import file_writer_tools
    from msmigrate.tools.phase_tools import phase_tools
    from msmigrate.tools.repo_reader import repo_reader_tools
    from msmigrate.tools.target_check_tools import target_check_tools

    return [*repo_reader_tools(ctx), *file_writer_tools(ctx), *target_check_tools(ctx), read_knowledge_tool(),
            search_knowledge_tool(), *phase_tools(ctx)]


def build_gates() -> dict[str, Any]:
    from msmigrate.agent.gates import GATES

    return dict(GATES)


def unknown_run_message(run_id: str, runs_dir: Path) -> str:
    """Where the resume looked, what is there, and how to look elsewhere."""
    runs_dir = Path(runs_dir).resolve()
    known = sorted(p.parent.name for p in runs_dir.glob("*/spec.yaml")) if runs_dir.is_dir() else []
    near = difflib.get_close_matches(run_id, known, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]}? " if near else (f"{len(known)} runs there; " if known else "no runs there; ")
    return (f"no run {run_id} in {runs_dir}; {hint}if it lives elsewhere pass --runs-dir DIR "
            "(or set MSMIGRATE_RUNS_DIR)")


def run_spec(run_id: str, settings: Settings) -> RunSpec:
    """The spec an existing run was started with; FileNotFoundError (a user-readable line) when there is none."""
    spec_file = settings.runs_dir / run_id / "spec.yaml"
    if not spec_file.is_file():
        raise FileNotFoundError(unknown_run_message(run_id, settings.runs_dir))
    return RunSpec.model_validate(yaml.safe_load(spec_file.read_text()))


class Run:
    """One run: its directory, its checkpointer and its compiled graph."""

    def __init__(self, spec: RunSpec, run_id: str, settings: Settings, *, policy: Policy | None = None,
                 on_event: Callable[[str, dict[str, Any]], None] | None = None,
                 tools: list | Callable[[RunContext], list] | None = None,
                 gates: dict[str, Any] | None = None):
        self.spec, self.run_id, self.settings = spec, run_id, settings
        self.run_dir = (settings.runs_dir / run_id).resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # Before anything runs or is written: secrets to mask by value, and what children may see of the environment.
        register_all([settings.llm_api_key, os.environ.get("OPENAI_API_KEY")])
        set_passthrough(spec.env_passthrough)
        spec_file = self.run_dir / "spec.yaml"
        if not spec_file.exists():  # the spec a resume reloads
            spec_file.write_text(mask_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False)))
        self.ctx = RunContext(
            run_id=run_id, run_dir=self.run_dir, source=spec.source, target=spec.target, model_name=spec.model_name,
            runtime_python=spec.runtime_python or settings.runtime_python,
            data_path=spec.data or (spec.source / "data" / "train.json"),
            allow_branch_b=spec.allow_branch_b, extra_editable=list(spec.extra_editable), approval=spec.approval,
        )
        self.worktree_error: str | None = None
        try:  # the run's own git worktree on msmigrate/<run_id>; the user's checkout is never touched
            attach(self.ctx)
        except WorktreeError as exc:  # G0 reports it (not a git repo, no commit): the run then edits nothing
            self.worktree_error = str(exc)
        self.trajectory = Trajectory(self.run_dir / "trajectory.jsonl")
        self.deps = RunDeps(
            ctx=self.ctx, spec=spec, policy=policy or build_policy(spec, settings),
            tools=(tools(self.ctx) if callable(tools) else tools) if tools is not None else build_tools(self.ctx),
            gates=gates or build_gates(),
            trajectory=self.trajectory, on_event=on_event or (lambda kind, data: None),
            worktree_error=self.worktree_error,
        )
        self._conn = sqlite3.connect(str(self.run_dir / "checkpoints.sqlite"), check_same_thread=False)
        self.graph = build_graph(self.deps, SqliteSaver(self._conn, serde=MaskingSerializer()))
        self.config = {"configurable": {"thread_id": run_id},
                       "recursion_limit": 4 * spec.budgets.policy_steps + 200}
        edits = self.snapshot().get("launch_edits")
        if edits:  # a resumed run launches with what the user approved, not with the spec's first settings
            from msmigrate.agent.nodes.verify import apply_launch_edits

            apply_launch_edits(self.deps, edits)

    @classmethod
    def resume(cls, run_id: str, settings: Settings, **kw: Any) -> "Run":
        return cls(run_spec(run_id, settings), run_id, settings, **kw)

    def initial_state(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "phase": "prepare", "attempts": {}, "gates": {}, "gate_history": [],
                "artifacts": {}, "counters": {}, "last_failure": None, "started_at": time.time(),
                "exit_status": None, "exit_detail": "", "instructions": self.spec.instructions,
                "max_attempts": self.spec.budgets.phase_attempts}

    def snapshot(self) -> dict[str, Any]:
        return dict(self.graph.get_state(self.config).values)

    def pending_interrupt(self) -> dict[str, Any] | None:
        state = self.graph.get_state(self.config)
        for task in state.tasks:
            for intr in task.interrupts:
                return intr.value
        return None

    def drive(self, approver: Approver | None = None, *, resume_value: Any = None) -> dict[str, Any]:
        """Run (or continue) until the graph ends or waits for a human with no approver given."""
        started = bool(self.graph.get_state(self.config).values)
        inp: Any = Command(resume=resume_value) if resume_value is not None else (None if started else self.initial_state())
        self.trajectory.append("drive", resumed=started)
        if started and resume_value is None:
            self.answer_crashed_calls()
        try:
            while True:
                self.graph.invoke(inp, self.config)
                payload = self.pending_interrupt()
                if payload is None:
                    self.release_worktree()
                    return self.snapshot()
                if approver is None:
                    return {**self.snapshot(), "interrupt": payload}
                inp = Command(resume=approver(payload))
        except Exception as exc:  # boundary: a bug fails the run with a status, not the caller
            tb = mask_text(traceback.format_exc())
            self.trajectory.append("error", error=repr(exc), traceback=tb)
            (self.run_dir / "error.txt").write_text(tb)
            return {**self.snapshot(), "exit_status": EXIT_ERROR,
                    "exit_detail": mask_text(f"{type(exc).__name__}: {exc}")}

    def answer_crashed_calls(self) -> None:
        """Resume after a run failed with a bug: tool calls that were pending when it failed are not replayed
        blindly — each gets an error observation naming the failure, and the policy decides again."""
        err = self.run_dir / "error.txt"
        state = self.graph.get_state(self.config)
        if not err.is_file():
            return
        first = next((ln for ln in reversed(err.read_text().splitlines()) if ln.strip()), "unknown error")
        err.rename(self.run_dir / f"error.{int(time.time())}.txt")  # answered once; a new failure writes anew
        messages = state.values.get("messages") or []
        if state.next != ("tools",) or not messages or not isinstance(messages[-1], AIMessage):
            return  # a node other than tools failed: it is re-run (the failure may have been an outage)
        answers = [ToolMessage(content=ToolResult.failure(
            f"not replayed: the run failed while this call was pending ({first[:300]}); call it again only if "
            f"something changed").to_json(), tool_call_id=c["id"], name=c["name"], status="error")
            for c in messages[-1].tool_calls]
        self.graph.update_state(self.config, {"messages": answers}, as_node="tools")
        self.trajectory.append("not_replayed", calls=[c["name"] for c in messages[-1].tool_calls], error=first)

    def release_worktree(self) -> None:
        """The run ended: remove its work tree (the branch and tags stay), so the user can check the branch out."""
        if self.ctx.checkout is not None and self.snapshot().get("exit_status"):
            release_worktree(self.ctx.checkout, self.ctx.target)

    def close(self) -> None:
        POOL.close_all()  # the warm target runtime lives as long as the run
        self._conn.close()
