"""The ``chat``, ``batch`` and ``eval`` commands. ``cli.py`` calls ``register(app)``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from msmigrate.agent.chat.render import make_console


err = make_console(stderr=True)


def chat(
    spec: Optional[Path] = typer.Argument(None, help="run spec YAML to start a new migration"),
    resume: Optional[str] = typer.Option(None, "--resume", help="continue the run with this id"),
    runs_dir: Optional[Path] = typer.Option(None, help="where runs/<run_id>/ go (env MSMIGRATE_RUNS_DIR)"),
    policy: Optional[str] = typer.Option(None, help="override the spec's policy: rules | llm | replay"),
    replay: Optional[Path] = typer.Option(None, help="trajectory.jsonl to replay (with --policy replay)"),
    approval: bool = typer.Option(True, "--approval/--no-approval", help="ask before accelerator launches"),
    plain: bool = typer.Option(False, "--plain", help="plain input() prompt instead of prompt_toolkit"),
) -> None:
    """Interactive migration: streams progress, asks before launches, slash commands (/help)."""
    from msmigrate.agent.chat.session import ChatSession
    from msmigrate.agent.cli import load_spec_or_exit, settings_for

    session = ChatSession(settings_for(runs_dir), plain=plain, approval=approval, policy=policy, replay=replay)
    if resume:
        try:
            session.open_existing(resume)
        except FileNotFoundError as exc:
            err.print(f"[red]{exc}[/]")
            raise typer.Exit(2)
        session.continue_run()
    elif spec is not None:
        session.open_new(load_spec_or_exit(spec))
        session.console.print("type /help for commands; Ctrl-C stops the agent after the current step")
        session.continue_run()
    else:
        session.console.print("no run yet: /resume RUN_ID, or restart with a SPEC.yaml")
    session.loop()


def register(app: typer.Typer) -> None:
    app.command("chat")(chat)
    from msmigrate.agent.batch.cli import batch
    from msmigrate.evals.harness.cli import eval_cmd

    app.command("batch")(batch)
    app.command("eval")(eval_cmd)


if __name__ == "__main__":  # python -m msmigrate.agent.cli_faces … (same as the `msmigrate` script)
    from msmigrate.agent.cli import app

    if not any(c.name == "chat" for c in app.registered_commands):  # cli.py registers the faces itself
        register(app)
    app()
