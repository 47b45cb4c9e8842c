"""Start, resume and drive one migration run: run dir, checkpointer (thread id = run id), policy, tools, gates.

This is one of the two boundaries allowed a catch-all: a bug anywhere in a run ends it with ``exit_status: error``
and the traceback in the trajectory, never a crash of the caller (the batch face relies on it)."""

from __future__ import annotations

import difflib
import os
import secrets
import shutil
import sqlite3
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml
from langgraph.checkpoint.sqlite import SqliteSaver
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command

from msmigrate.agent.budgets import idle_seconds
from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.deps import RunDeps
from msmigrate.agent.graph import build_graph
from msmigrate.agent.input_checks import InputError, spec_problem
from msmigrate.agent.masked_serde import MaskingSerializer
from msmigrate.agent.policies.base import Policy
from msmigrate.agent.gate_currency import invalidate
from msmigrate.agent.policies.base import EndpointError
from msmigrate.agent.report import write_artifacts
from msmigrate.agent.state import EXIT_AWAITING_APPROVAL, EXIT_ERROR, EXIT_STOPPED, PHASE_GATES
from msmigrate.agent.writer_recovery import settle_worktree
from msmigrate.agent.trajectory import Trajectory
from msmigrate.core.run_context import RunContext
from msmigrate.tools.warm_runtime import POOL
from msmigrate.core.tool_result import ToolResult
from msmigrate.core.secret_mask import mask_text, register_all
from msmigrate.tools.subprocess_env import set_passthrough
from msmigrate.tools.worktree import Worktree, WorktreeError, attach, discard_worktree, release_worktree

Approver = Callable[[dict[str, Any]], Any]


@dataclass
class DriveHooks:
    """What an interactive face plugs into the run loop (``Run.drive``); the defaults drive headless.

    The hooks run in the loop's thread at step boundaries, where the checkpoint has just been written: stopping
    there leaves a run that resumes exactly at that step, and instructions written there are read at the policy's
    next decision."""

    on_step: Callable[[str, dict[str, Any]], None] = lambda node, update: None  # after each graph node
    stop_requested: Callable[[], bool] = lambda: False
    has_instructions: Callable[[], bool] = lambda: False
    take_instructions: Callable[[], list[str]] = list  # drains the queued texts
    face: str = ""  # written into the trajectory's drive record


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
    from msmigrate.agent.knowledge_view import target_knowledge_tool
    from msmigrate.knowledge.retrieval import search_knowledge_tool
    from msmigrate.tools.file_writer import file_writer_tools
    from msmigrate.tools.megatron.route_tools import megatron_tools
    from msmigrate.tools.phase_tools import phase_tools
    from msmigrate.tools.repo_reader import repo_reader_tools
    from msmigrate.tools.target_check_tools import target_check_tools

    return [*repo_reader_tools(ctx), *file_writer_tools(ctx), *target_check_tools(ctx), target_knowledge_tool(ctx),
            search_knowledge_tool(), *phase_tools(ctx), *megatron_tools(ctx)]


def build_gates() -> dict[str, Any]:
    from msmigrate.agent.backend_route import route_gates
    from msmigrate.agent.routes.fsdp2.gates import GATES
    from msmigrate.agent.routes.megatron.gates import GATES as MEGATRON_GATES

    return route_gates(GATES, MEGATRON_GATES)


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
        # Before anything is created (run folder, work tree, branch): a spec that cannot run is one line, exit 2.
        problem = spec_problem(spec, spec.runtime_python or settings.runtime_python)
        if problem:
            raise InputError(problem)
        fresh = not self.run_dir.exists()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._open(spec, run_id, settings, policy, on_event, tools, gates)
        except BaseException:
            self._discard_start(fresh)
            raise

    def _open(self, spec: RunSpec, run_id: str, settings: Settings, policy: Policy | None,
              on_event: Callable[[str, dict[str, Any]], None] | None,
              tools: list | Callable[[RunContext], list] | None, gates: dict[str, Any] | None) -> None:
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
            probe_timeout_s=spec.launch.probe_timeout_s,
        )
        policy = policy or build_policy(spec, settings)  # before the work tree: a policy that fails leaves nothing
        self.worktree_error: str | None = None
        self.worktree: Worktree | None = None
        try:  # the run's own git worktree on msmigrate/<run_id>; the user's checkout is never touched
            self.worktree = attach(self.ctx)
        except WorktreeError as exc:  # G0 reports it (not a git repo, no commit): the run then edits nothing
            self.worktree_error = str(exc)
        self.trajectory = Trajectory(self.run_dir / "trajectory.jsonl")
        self.deps = RunDeps(
            ctx=self.ctx, spec=spec, policy=policy,
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

    def _discard_start(self, fresh: bool) -> None:
        """Opening failed: take back what this opening created — a new work tree with its branch and base tag, and
        a run folder that did not exist before — so an early failure leaves nothing in the user's target."""
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()
        wt = getattr(self, "worktree", None)
        if wt is not None and wt.created:
            discard_worktree(wt)
        if fresh and self.run_dir.is_dir():
            shutil.rmtree(self.run_dir, ignore_errors=True)

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

    def drive(self, approver: Approver | None = None, *, resume_value: Any = None,
              hooks: DriveHooks | None = None) -> dict[str, Any]:
        """The one run loop every face uses: stream the graph a super-step at a time until it ends, waits for an
        approval ``approver`` does not answer (none given), or the face asks it to stop. Returns the state with an ``exit_status``:
        the graph's own, ``awaiting_approval`` (plus ``interrupt``: the question), ``stopped_by_user``, or ``error``
        (plus ``error_file``) when a bug ended the drive."""
        hooks = hooks or DriveHooks()
        self.deps.stop_requested = hooks.stop_requested  # read between the verify gates and by a Slurm launch
        started = bool(self.graph.get_state(self.config).values)
        inp: Any = Command(resume=resume_value) if resume_value is not None else (None if started else self.initial_state())
        self.trajectory.append("drive", resumed=started, **({"face": hooks.face} if hooks.face else {}))
        self.deps.idle_s = idle_seconds(self.trajectory.records())  # the wall budget counts the run's own time
        if started and resume_value is None:
            self.answer_crashed_calls()
        try:
            if started:
                self.recover_writer()
            while True:
                step_end = self._stream(inp, hooks)
                if step_end == "stopped":
                    self.trajectory.append("stopped", by="user")
                    return self.exit_report({**self.snapshot(), "exit_status": EXIT_STOPPED,
                                             "exit_detail": self.stop_detail()})
                if step_end == "instructions":
                    inp = None  # continue from the checkpoint the instructions were written into
                    continue
                payload = self.pending_interrupt()
                if payload is None:
                    state = self.snapshot()
                    if not state.get("exit_status"):
                        state = self.exit_report({**state, "exit_status": EXIT_ERROR,
                                                  "exit_detail": "the graph ended without an exit status"})
                    kept = self.release_worktree()
                    return {**state, "worktree_kept": kept} if kept else state
                if approver is None:
                    self.trajectory.append("paused", reason=EXIT_AWAITING_APPROVAL)  # idle from here to the resume
                    return self.exit_report({
                        **self.snapshot(), "exit_status": EXIT_AWAITING_APPROVAL, "interrupt": payload,
                        "exit_detail": f"paused for your approval of {payload.get('kind')} "
                                       f"({', '.join(payload.get('gates', []))}); nothing of it ran yet"})
                asked = time.time()
                answer = approver(payload)
                waited = time.time() - asked
                self.deps.idle_s += waited
                self.trajectory.append("approval_wait", seconds=round(waited, 3))
                inp = Command(resume=answer)
        except KeyboardInterrupt:  # a headless Ctrl-C inside a step: the face handles it; the run still reports
            self.trajectory.append("stopped", by="user", inside_step=True)
            self.exit_report({**self.snapshot(), "exit_status": EXIT_STOPPED,
                              "exit_detail": "interrupted (Ctrl-C or SIGTERM) inside a step; the resumed run redoes "
                                             "that step"})
            raise
        except Exception as exc:  # boundary: a bug fails the run with a status, not the caller
            tb = mask_text(traceback.format_exc())
            self.trajectory.append("error", error=repr(exc), traceback=tb)
            error_file = self.run_dir / "error.txt"
            error_file.write_text(tb)
            return self.exit_report({**self.snapshot(), "exit_status": EXIT_ERROR, "error_file": str(error_file),
                                     "exit_detail": mask_text(f"{type(exc).__name__}: {exc}"),
                                     "exit_todo": self.error_todo(exc)})

    def exit_report(self, state: dict[str, Any]) -> dict[str, Any]:
        """``verification_report.md`` + ``evidence.json`` for an exit the graph's report node did not write (a
        stop, a pause for approval, an error): every run ends with both. The checkpoint is left as it is, so the
        run resumes from where it was; the report is rewritten when it ends."""
        try:
            artifacts = write_artifacts(self.deps, state)
        except Exception as exc:  # boundary (inside drive's): a report that cannot be written must not hide the exit
            self.trajectory.append("report_failed", error=mask_text(repr(exc)), exit_status=state.get("exit_status"))
            return state
        self.trajectory.append("report_written", exit_status=state.get("exit_status"), report=artifacts["report"])
        return {**state, "artifacts": artifacts}

    def stop_detail(self) -> str:
        state = self.snapshot()
        phase = state.get("phase")
        left = [g for g in PHASE_GATES.get(phase or "", ()) if g not in (state.get("gates") or {})]
        return (f"stopped at a step boundary by the user, in phase {phase}"
                + (f", before {', '.join(left)}" if phase == "verify" and left else "")
                + "; nothing more was started after the stop")

    def error_todo(self, exc: Exception) -> str:
        """What to do after an error: an endpoint outage is the user's to fix, a bug is ours to report."""
        resume = f"`msmigrate run --resume {self.run_id} --runs-dir {self.run_dir.parent}`"
        if isinstance(exc, EndpointError):
            url = self.spec.llm.base_url or self.settings.llm_base_url
            return (f"check that the LLM endpoint {url} is up and answers chat completions (base_url, model, API "
                    f"key), then {resume} continues from the last checkpoint")
        return (f"the traceback is in {self.run_dir / 'error.txt'}; {resume} continues from the last checkpoint "
                "(report the traceback if it fails again)")

    def recover_writer(self) -> None:
        """A resumed run first repairs what a dead process left (``writer_recovery``), then drops the gate records
        that no longer prove the work branch, so their gates run again."""
        if self.ctx.checkout is None:
            return
        problem = settle_worktree(self.ctx, self.trajectory, "resume: the previous process may have died mid-write",
                                  self.snapshot().get("plan"))
        if problem:  # the gates refuse to run on it too, with the same reason
            self.trajectory.append("writer_not_recovered", problem=problem)
        self.invalidate_gates("resume")

    def invalidate_gates(self, why: str) -> list[str]:
        """Drop the gate records that no longer prove the work branch (``gate_currency``) from the state, so the
        graph runs their gates again; the history keeps them. Returns the dropped gates. Only between drives."""
        state = self.snapshot()
        kept = invalidate(self.ctx, state, self.trajectory, why)
        dropped = [g for g in (state.get("gates") or {}) if g not in kept]
        if dropped:
            self.graph.update_state(self.config, {"gates": kept})
        return dropped

    def rewrite_report(self) -> str | None:
        """A run that already ended gets its report and evidence rewritten for the branch as it is now (after an
        ``/undo``): the old report must not go on certifying commits the branch no longer holds."""
        state = self.snapshot()
        if not (state.get("artifacts") or {}).get("report"):
            return None
        return write_artifacts(self.deps, state)["report"]

    def _stream(self, inp: Any, hooks: DriveHooks) -> str:
        """One pass of the graph from ``inp``: "done" when it ends or pauses by itself, "stopped" or
        "instructions" when it was left at a step boundary (the checkpointer has just saved the state there)."""
        for chunk in self.graph.stream(inp, self.config, stream_mode="updates"):
            for node, update in chunk.items():
                if not node.startswith("__"):
                    hooks.on_step(node, update if isinstance(update, dict) else {})
            if hooks.stop_requested():
                return "stopped"
            if hooks.has_instructions() and not self.pending_interrupt():
                self.add_instructions(hooks.take_instructions())
                return "instructions"
        return "done"

    def add_instructions(self, texts: list[str]) -> bool:
        """Append the user's free text to the state's instructions (the policy reads them at its next decision).
        Only between drives or from the loop itself at a step boundary."""
        if not texts:
            return False
        current = self.snapshot().get("instructions", "")
        self.graph.update_state(self.config, {"instructions": "\n".join(t for t in (current, *texts) if t)})
        for text in texts:
            self.trajectory.append("instruction", text=text)
        return True

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

    def release_worktree(self) -> str | None:
        """The run ended: remove its work tree (the branch and tags stay), so the user can check the branch out.
        A work tree holding what its branch does not is left where it is: returns where and why (also in the
        trajectory, and appended to the report)."""
        if self.ctx.checkout is None or not self.snapshot().get("exit_status"):
            return None
        kept = release_worktree(self.ctx.checkout, self.ctx.target, list(self.ctx.editable_paths))
        if kept:
            self.trajectory.append("worktree_kept", path=str(self.ctx.target), why=kept)
            self.deps.emit("worktree_kept", path=str(self.ctx.target), why=kept)
            report = self.run_dir / "verification_report.md"
            if report.is_file():
                with open(report, "a", encoding="utf-8") as fh:
                    fh.write(f"\n## Work tree kept\n\n{mask_text(kept)}. Commit or copy what you need from it, "
                             f"then `git worktree remove {self.ctx.target}`.\n")
        return kept

    def close(self) -> None:
        POOL.close_all()  # the warm target runtime lives as long as the run
        self._conn.close()

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
