"""Slash commands of the chat. Each takes the session and the rest of the line; returns False to end the session.

The session is passed in and typed by the ``CommandSession`` protocol below (what a command may use of it), so this
module never imports ``session.py``, which imports it."""

from __future__ import annotations

from typing import Any, Callable, Protocol

import git
from rich.markup import escape

from msmigrate.faces.chat.render import gates_table, status_lines
from msmigrate.agent.nodes.work import clear_messages
from msmigrate.agent.gate_currency import invalidate, stale_gates
from msmigrate.agent.state import WORK_PHASES, gates_before, next_phase
from msmigrate.tools.file_writer import undo_last

DIFF_MAX_LINES = 400


class CommandSession(Protocol):
    """The part of ``ChatSession`` a slash command uses."""

    console: Any
    run: Any
    pending: Any
    driver: Any

    def need_run(self) -> bool: ...
    def refuse_if_busy(self) -> bool: ...
    def open_existing(self, run_id: str) -> None: ...
    def continue_run(self) -> None: ...
    def drive(self, resume_value: Any = None) -> None: ...


def cmd_help(s: CommandSession, arg: str) -> bool:
    for name, (_, text) in COMMANDS.items():
        s.console.print(f"  [bold]{name}[/] {text}")
    s.console.print("  anything else: a question (answered from the run state) or an instruction for the agent")
    return True


def cmd_status(s: CommandSession, arg: str) -> bool:
    if s.run is None:
        s.console.print("no run open: /resume RUN_ID, or start chat with a SPEC")
        return True
    state = s.run.snapshot()
    for line in status_lines(s.run.run_id, state, s.pending, s.driver.busy if s.driver else False,
                             stale_gates(s.run.ctx, state)):
        s.console.print(escape(line))
    return True


def cmd_gates(s: CommandSession, arg: str) -> bool:
    if s.need_run():
        state = s.run.snapshot()
        s.console.print(gates_table(state, stale_gates(s.run.ctx, state)))
    return True


def diff_text(run) -> str:
    """``git diff`` of the run's work branch against its base tag (every edit this run made, nothing else)."""
    ctx = run.ctx
    base, branch = f"{ctx.work_branch}/base", ctx.work_branch
    try:
        repo = git.Repo(ctx.target)
        if branch not in [h.name for h in repo.heads]:
            return "(no edits yet: the work branch does not exist)"
        stat = repo.git.diff("--stat", f"{base}..{branch}")
        full = repo.git.diff("--no-color", f"{base}..{branch}")
    except (git.GitCommandError, git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
        return f"(diff unavailable: {exc})"
    if not full:
        return f"(no changes on {branch} since {base})"
    lines = full.splitlines()
    cut = f"\n… {len(lines) - DIFF_MAX_LINES} more lines" if len(lines) > DIFF_MAX_LINES else ""
    return f"{stat}\n\n" + "\n".join(lines[:DIFF_MAX_LINES]) + cut


def cmd_diff(s: CommandSession, arg: str) -> bool:
    if s.need_run():
        s.console.print(escape(diff_text(s.run)), markup=True, highlight=False)
    return True


def cmd_undo(s: CommandSession, arg: str) -> bool:
    if not s.need_run() or s.refuse_if_busy():
        return True
    res = undo_last(s.run.ctx)
    if res.ok:
        s.console.print(f"undone {res.data['undone'][:10]} ({escape(res.data['summary'])}); work branch head is now "
                        f"{res.data['head'][:10]}")
        # exactly the records the undo made stale: their commit left the branch, or what they proved changed
        dropped = s.run.invalidate_gates(f"/undo of {res.data['undone'][:12]}")
        if dropped:
            s.console.print(f"no longer proven (stale, re-run): {', '.join(dropped)}; /retry PHASE re-runs a phase "
                            "and everything after it")
        report = s.run.rewrite_report()
        if report:
            s.console.print(f"report rewritten for the branch as it is now: {report}")
    else:
        s.console.print(f"[red]undo refused[/]: {escape(str(res.error))}")
    return True


def cmd_retry(s: CommandSession, arg: str) -> bool:
    """``/retry``: continue a stopped / failed drive from its last checkpoint. ``/retry PHASE``: reopen the run at a
    work phase (after an /undo or a failed run); the graph continues from there through all later gates."""
    if not s.need_run() or s.refuse_if_busy():
        return True
    phase = arg.strip()
    state = s.run.snapshot()
    current = invalidate(s.run.ctx, state, s.run.trajectory, "/retry")  # records that still prove the branch
    if not phase and state.get("exit_status") and state.get("exit_status") != "success":
        phase = ((state.get("last_failure") or {}).get("owner") or "model")
        phase = phase if phase in WORK_PHASES else "config"
    elif not phase and state.get("exit_status") == "success" and next_phase(current) != "report":
        phase = next_phase(current)  # an /undo since the run ended: the earliest phase no longer proven
        phase = phase if phase in WORK_PHASES else "config"
    if phase:
        if phase not in WORK_PHASES:
            s.console.print(f"[red]unknown phase {escape(phase)}[/]; one of {', '.join(WORK_PHASES)}")
            return True
        # Written as if classify had routed here: the router then sends the run to ``phase``. Re-entering a phase
        # voids its gates and every later one (as classify does), and any record the branch no longer supports.
        s.run.graph.update_state(s.run.config, {"phase": phase, "exit_status": None, "exit_detail": "",
                                                "messages": clear_messages(), "attempts": {},
                                                "gates": gates_before(current, phase)}, as_node="classify")
        s.pending = None
        s.console.print(f"reopened at phase {phase}")
    elif state.get("exit_status") == "success":
        s.console.print("the run already succeeded; /retry PHASE reopens it at a phase")
        return True
    s.drive()
    return True


def cmd_resume(s: CommandSession, arg: str) -> bool:
    if s.refuse_if_busy():
        return True
    if not arg.strip():
        s.console.print("usage: /resume RUN_ID")
        return True
    try:
        s.open_existing(arg.strip())
    except FileNotFoundError as exc:
        s.console.print(f"[red]{escape(str(exc))}[/]")
        return True
    s.continue_run()
    return True


def cmd_report(s: CommandSession, arg: str) -> bool:
    if not s.need_run():
        return True
    state = s.run.snapshot()
    report = (state.get("artifacts") or {}).get("report")
    if not report and s.run.run_dir.joinpath("verification_report.md").is_file():
        report = str(s.run.run_dir / "verification_report.md")  # written when a drive stopped or failed
    if not report:
        s.console.print("no report yet: it is written when the run ends")
        return True
    s.console.print(f"report: {report}")
    s.console.print(f"evidence: {(state.get('artifacts') or {}).get('evidence')}")
    s.console.print(f"exit status: {state.get('exit_status')} — {escape(str(state.get('exit_detail', '')))}")
    s.console.print(gates_table(state, stale_gates(s.run.ctx, state)))
    return True


def cmd_quit(s: CommandSession, arg: str) -> bool:
    return False


COMMANDS: dict[str, tuple[Callable[[CommandSession, str], bool], str]] = {
    "/status": (cmd_status, "phase, gates passed, counters, pending approval"),
    "/gates": (cmd_gates, "table of the gates G0-G6 with their latest result"),
    "/diff": (cmd_diff, "git diff of the run's work branch against its base tag"),
    "/undo": (cmd_undo, "roll back the last accepted edit (one commit of the work branch)"),
    "/retry": (cmd_retry, "[PHASE] continue a stopped/failed run, or reopen it at model|data|config"),
    "/resume": (cmd_resume, "RUN_ID open another run (from the same runs dir) and continue it"),
    "/report": (cmd_report, "where the verification report is, and its gate table"),
    "/help": (cmd_help, "this list"),
    "/quit": (cmd_quit, "leave (the run stays resumable)"),
}
