"""How the chat shows what the run does: one line per event as it happens, plus status / gates / approval views.

Everything here formats; nothing decides. Events are the ``deps.emit`` kinds of the graph nodes."""

from __future__ import annotations

import json
import re
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from msmigrate.agent.gate_currency import STALE
from msmigrate.agent.report import GATE_TITLES
from msmigrate.core.text_clip import clip

# Width a console gets when it writes to a pipe, file or CI log: wide enough that no table row is ever folded.
_UNWRAPPED_WIDTH = 100_000


def make_console(*, stderr: bool = False, **kwargs: Any) -> Console:
    """The one way the faces make a rich console. Text is soft-wrapped everywhere (a terminal folds long lines itself,
    so a path or run id copied from the screen is whole). When the output is not a terminal the width is not taken
    from ``COLUMNS`` or the 80-column default either: logs, pipes and CI get every path, JSON line and table row on
    one line, whatever the environment says."""
    console = Console(stderr=stderr, soft_wrap=True, **kwargs)
    if not console.is_terminal:
        console.width = _UNWRAPPED_WIDTH
    return console


def _tool_outcome(result: str) -> str:
    """A one-line gist of a ToolResult JSON observation (``ok`` + path, or the error). The event carries only the
    head of the observation, so this reads fields with patterns rather than parsing the (cut) JSON."""
    ok = re.search(r'"ok":\s*(true|false)', result)
    if ok is None:
        return result[:120].replace("\n", " ")
    where = re.search(r'"(?:path|tag)":\s*"([^"]*)"', result)
    where_text = where.group(1) if where else ""
    if ok.group(1) == "true":
        return f"ok {where_text}".strip()
    error = re.search(r'"error":\s*"((?:[^"\\]|\\.)*)', result)
    return f"failed {where_text}: {error.group(1)[:140] if error else ''}".strip()


class EventPrinter:
    """The ``on_event`` callback of a chat run: streams node progress, policy messages and tool calls."""

    def __init__(self, console: Console):
        self.console = console
        self.phase: str | None = None

    def phase_changed(self, phase: str | None) -> None:
        if phase and phase != self.phase:
            self.phase = phase
            self.console.print(f"[bold cyan]── phase {escape(phase)} ──[/]")

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        c = self.console
        if kind == "plan":
            c.print(f"plan: route [bold]{data.get('route')}[/], data branch [bold]{data.get('data_branch')}[/], "
                    f"template [bold]{escape(str(data.get('template')))}[/], similar case {escape(str(data.get('similar_case')))}")
        elif kind == "decision":
            self.phase_changed(data.get("phase"))
            text = str(data.get("content") or "").strip().replace("\n", " ")
            calls = ", ".join(data.get("tool_calls") or []) or "nothing more: phase gate next"
            c.print(f"[magenta]policy[/] {escape(text[:200])}" if text else "[magenta]policy[/]")
            c.print(f"  proposes: {escape(calls)}")
        elif kind == "tool":
            c.print(f"  [blue]tool[/] {escape(str(data.get('name')))} → {escape(_tool_outcome(str(data.get('result', ''))))}")
        elif kind == "gate_start":
            c.print(f"  gate {data.get('gate')} running …")
        elif kind == "gate_end":
            mark = "[green]PASS[/]" if data.get("passed") else "[red]FAIL[/]"
            c.print(f"  gate {data.get('gate')} {mark} {escape(clip(data.get('summary', ''), 200))}")
        elif kind == "classify":
            c.print(f"  classify {data.get('gate')} → case {data.get('case_id')} (owner {data.get('owner')}) "
                    f"→ back to {data.get('route')}")
        elif kind == "launch_progress":
            c.print(f"    {escape(str(data.get('label', '')))} iteration {data.get('iteration')}/{data.get('total')} "
                    f"loss {data.get('loss')}")
        elif kind == "gates_stopped":
            c.print(f"  [yellow]stopped before {data.get('before')}[/]: nothing more is launched")
        elif kind == "stop_grace":
            c.print(f"  [yellow]{escape(str(data.get('detail', '')))}[/]")
        elif kind == "worktree_kept":
            c.print(f"[yellow]work tree kept[/]: {escape(str(data.get('why', '')))}")
        elif kind == "exit":
            colour = "green" if data.get("exit_status") == "success" else "red"
            c.print(f"[bold {colour}]exit: {data.get('exit_status')}[/] — {escape(str(data.get('detail', '')))}")
            if data.get("report"):
                c.print(f"report: {data['report']}")
        else:
            c.print(f"[dim]{kind}: {escape(json.dumps(data, default=str)[:200])}[/]")


def gates_table(state: dict[str, Any], stale: dict[str, str] | None = None) -> Table:
    """``stale``: gate -> why its passed record no longer proves the work branch (``gate_currency``)."""
    table = Table(title="gates", show_lines=False)
    for col in ("gate", "what it proves", "result", "summary"):
        table.add_column(col)
    gates = state.get("gates", {})
    history = state.get("gate_history", [])
    for name, title in GATE_TITLES.items():
        rec = gates.get(name)
        if rec is None:
            # re-entering a phase drops its gates' current records (classify), and a resume shows that state:
            # the last outcome is still in the history and is what the user needs to see
            earlier = next((r for r in reversed(history) if r.get("gate") == name), None)
            result = "not run" if earlier is None else (STALE if earlier.get("passed") else "FAIL (earlier; to re-run)")
            rec, why = earlier, ""
        else:
            why = (stale or {}).get(name, "") if rec.get("passed") else ""
            result = STALE if why else "PASS" if rec.get("passed") else "FAIL"
        summary = (f"{why} — " if why else "") + str((rec or {}).get("summary", ""))
        table.add_row(name, title, result, escape(clip(summary, 160)))
    return table


def status_lines(run_id: str, state: dict[str, Any], pending: dict[str, Any] | None, busy: bool,
                 stale: dict[str, str] | None = None) -> list[str]:
    c = state.get("counters", {})
    plan = state.get("plan", {})
    gates = state.get("gates", {})
    passed = [g for g, r in sorted(gates.items()) if r.get("passed") and g not in (stale or {})]
    history = state.get("gate_history", [])
    latest = {r.get("gate"): r for r in history}  # each gate's last run
    dropped = sorted(g for g, r in latest.items() if g and g not in gates and r.get("passed"))
    outdated = sorted({*(stale or {}), *dropped})
    lines = [
        f"run {run_id}: phase {state.get('phase', 'not started')}, "
        f"exit status {state.get('exit_status') or '(running)' if state else 'not started'}",
        f"gates passed: {', '.join(passed) or 'none'}",
        *([f"{STALE}: {', '.join(outdated)} (their proof no longer holds for the work branch)"] if outdated else []),
        f"policy steps {int(c.get('policy_steps', 0))}, tool calls {int(c.get('tool_calls', 0))}, "
        f"tokens {int(c.get('tokens', 0))}, launches {int(c.get('launches', 0))}",
    ]
    if plan:
        lines.append(f"plan: model_id {plan.get('model_id')}, route {plan.get('route')}, data branch "
                     f"{plan.get('data_branch')}, template {plan.get('template')}")
    if state.get("last_failure"):
        f = state["last_failure"]
        lines.append(f"last failure: gate {f.get('gate')} → case {f.get('case_id')} (owner {f.get('owner')})")
    if pending:
        lines.append(f"waiting for your approval: {pending.get('kind')} of {', '.join(pending.get('gates', []))}")
    if busy:
        lines.append("the agent is working (Ctrl-C stops after the current step)")
    return lines


def approval_view(console: Console, payload: dict[str, Any]) -> None:
    if payload.get("kind") == "code_execution":
        console.print(f"[bold yellow]Approval needed[/]: code_execution for gates {', '.join(payload.get('gates', []))}"
                      f" — {payload.get('what', '')}")
        console.print(f"  work branch: {payload.get('work_branch')} (see /diff)")
        console.print("answer [bold]approve[/] or [bold]reject[/]; slash commands still work")
        return
    console.print(f"[bold yellow]Approval needed[/]: {payload.get('kind')} for gates "
                  f"{', '.join(payload.get('gates', []))} with these launch settings:")
    for key, value in (payload.get("launch") or {}).items():
        console.print(f"  {key}: {value}")
    if payload.get("error"):
        console.print(f"[red]{escape(str(payload['error']))}[/]")
    console.print("answer [bold]approve[/], [bold]reject[/], or [bold]edit KEY=VALUE …[/] "
                  "(e.g. edit nproc_per_node=2 gate_train_iters=8, or edit backend=slurm slurm.partition=NAME); "
                  "slash commands still work")
