"""``msmigrate`` command line, the one module that registers every face: run, verify, demo, fixtures,
validate-config, chat, batch and eval (batch and eval keep their options in their own packages)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from msmigrate.agent.config import RunSpec, Settings
from msmigrate.faces.batch.cli import batch
from msmigrate.faces.chat.render import EventPrinter, make_console
from msmigrate.faces.eval.cli import eval_cmd

# Usage errors and tracebacks keep rich's boxes only on a terminal: in a pipe or CI log they are click's plain lines,
# never folded to COLUMNS (an option name or path in an error stays whole and greppable).
_ON_TERMINAL = sys.stderr.isatty()
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode="rich" if _ON_TERMINAL else None,
                  pretty_exceptions_enable=_ON_TERMINAL,
                  help="Migrate multimodal models into MindSpeed-MM's FSDP2 plugin route, with proof.")
fixtures_app = typer.Typer(no_args_is_help=True, help="Generate the stand-in target and known-model source fixtures.")
app.add_typer(fixtures_app, name="fixtures")
console = make_console(stderr=True)


# The chat's event printer is the one way progress is shown; headless commands print it on stderr.
_progress_printer = EventPrinter(console)


def _cli_approver(payload: dict) -> dict:
    console.print(f"[yellow]Approval needed[/]: {payload.get('kind')} {json.dumps(payload.get('launch', payload))}")
    answer = typer.prompt("approve / reject", default="approve")
    return {"action": "reject" if answer.strip().lower().startswith("r") else "approve"}


def settings_for(runs_dir: Optional[Path]) -> Settings:
    return Settings(**({"runs_dir": runs_dir} if runs_dir else {}))


def load_spec_or_exit(spec: Path) -> RunSpec:
    """A bad spec is a user error: one red line and exit code 2, never a traceback."""
    try:
        return RunSpec.load(spec)
    except (OSError, ValueError) as exc:
        console.print(f"[red]invalid spec {spec}[/]: {exc}")
        raise typer.Exit(2)


def _drive_headless(r) -> None:
    """Drive a run to its end, print the JSON summary on stdout, exit 0 only on success."""
    console.print(f"run {r.run_id} → {r.run_dir}")
    state = r.drive(_cli_approver if r.spec.approval and sys.stdin.isatty() else None)
    r.close()
    print(json.dumps(_summary(state), indent=2))
    raise typer.Exit(0 if state.get("exit_status") == "success" else 1)


def _summary(state: dict) -> dict:
    return {
        "run_id": state.get("run_id"), "exit_status": state.get("exit_status"), "exit_detail": state.get("exit_detail"),
        "gates": {g: r.get("passed") for g, r in sorted(state.get("gates", {}).items())},
        "report": state.get("artifacts", {}).get("report"), "counters": state.get("counters", {}),
    }


@app.command()
def run(
    spec: Optional[Path] = typer.Argument(None, help="run spec YAML (source, target, model_name, policy, budgets …)"),
    resume: Optional[str] = typer.Option(None, "--resume", help="continue the run with this id"),
    policy: Optional[str] = typer.Option(None, help="override the spec's policy: rules | llm | replay"),
    runs_dir: Optional[Path] = typer.Option(None, help="where runs/<run_id>/ go (env MSMIGRATE_RUNS_DIR)"),
) -> None:
    """Headless single migration; prints a JSON summary on stdout."""
    from msmigrate.agent.runner import Run, new_run_id

    settings = settings_for(runs_dir)
    if resume:
        r = Run.resume(resume, settings, on_event=_progress_printer)
    elif spec is not None:
        s = load_spec_or_exit(spec)
        if policy:
            s = s.model_copy(update={"policy": policy})
        r = Run(s, new_run_id(s.model_name), settings, on_event=_progress_printer)
    else:
        console.print("[red]give a SPEC.yaml or --resume RUN_ID[/]")
        raise typer.Exit(2)
    _drive_headless(r)


@app.command()
def verify(
    spec: Path = typer.Argument(..., help="run spec naming source, target and model_name of an existing migration"),
    runs_dir: Optional[Path] = typer.Option(None, help="where runs/<run_id>/ go (env MSMIGRATE_RUNS_DIR)"),
) -> None:
    """The gates alone (G0–G6) on a checkout that already holds a migration; edits nothing."""
    from msmigrate.agent.runner import Run, new_run_id

    s = load_spec_or_exit(spec)
    # one repair round is pointless without a policy: a failing gate ends the run at its second look
    s = s.model_copy(update={"policy": "none", "budgets": s.budgets.model_copy(update={"phase_attempts": 1})})
    _drive_headless(Run(s, new_run_id(s.model_name), settings_for(runs_dir), on_event=_progress_printer))


@app.command()
def demo(
    model: str = typer.Option("qwen2_vl", help="bundled known model to migrate (see `msmigrate fixtures list`)"),
    workdir: Path = typer.Option(Path("demo_workdir"), help="where the stand-in target, the source and runs go"),
) -> None:
    """The main job on embedded defaults: offline, no LLM, no accelerator."""
    from msmigrate.faces.demo import run_demo

    state = run_demo(model, workdir, on_event=_progress_printer)
    print(json.dumps(_summary(state), indent=2))
    if state.get("exit_status") == "success":
        console.print(f"[green]green report:[/] {state['artifacts']['report']}")
    raise typer.Exit(0 if state.get("exit_status") == "success" else 1)


@fixtures_app.command("target")
def fixtures_target(dest: Path) -> None:
    """Write a stand-in MindSpeed-MM checkout (git-initialised) into DEST."""
    from msmigrate.testbeds.standin import write_standin

    print(write_standin(dest))


@fixtures_app.command("source")
def fixtures_source(
    name: str,
    dest: Path,
    for_runtime: Optional[str] = typer.Option(None, "--for-runtime", help="build inside this Python (the target "
                                              "runtime), so its transformers can read the folder"),
) -> None:
    """Build the tiny offline source model NAME into DEST."""
    from msmigrate.testbeds.fixtures import FIXTURES

    if name not in FIXTURES:
        console.print(f"[red]unknown fixture {name}[/]; known: {', '.join(sorted(FIXTURES))}")
        raise typer.Exit(2)
    if for_runtime:
        from msmigrate.testbeds.fixtures.in_runtime import build_source_in_runtime

        try:
            print(build_source_in_runtime(name, dest, for_runtime))
        except (RuntimeError, OSError) as exc:
            console.print(f"[red]{exc}[/]", markup=False)
            raise typer.Exit(1)
        return
    from msmigrate.testbeds.fixtures import build_source

    print(build_source(name, dest))


@fixtures_app.command("list")
def fixtures_list() -> None:
    from msmigrate.testbeds.fixtures import FIXTURES

    for name, spec in sorted(FIXTURES.items()):
        print(f"{name}\t{getattr(spec, 'family', '')}")


@app.command("validate-config")
def validate_config_cmd(
    config: Path = typer.Argument(..., help="a plugin-route YAML"),
    target: Path = typer.Option(..., help="the MindSpeed-MM checkout the YAML is for"),
    runtime_python: str = typer.Option(sys.executable, help="target runtime interpreter (for the schema probe)"),
) -> None:
    """The strict config check alone: schema from the target's own argument models (probe in the target runtime),
    registries and plugin paths from the target; no module tree (the pattern audit needs a run)."""
    from msmigrate.tools.yaml_validator import schema_from_target, validate_config

    if not config.is_file():
        console.print(f"[red]{config} not found[/]")
        raise typer.Exit(2)
    schema = schema_from_target(target, runtime_python)
    if not schema.ok:
        console.print(f"[red]cannot derive the schema from {target}[/]: {schema.error}")
        raise typer.Exit(2)
    result = validate_config(config.resolve(), schema=schema.data["schema"], target_root=target.resolve())
    for f in result.data.get("findings", []):
        console.print(f"{f['severity']:>7} [{f['code']}] {f['path']} (line {f.get('line')}): {f['message']}"
                      + (f" — {f['suggestion']}" if f.get("suggestion") else ""), markup=False)
    console.print(result.data.get("summary", result.error or ""), markup=False)
    raise typer.Exit(0 if result.ok else 1)


@app.command("chat")
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
    from msmigrate.faces.chat.session import ChatSession

    session = ChatSession(settings_for(runs_dir), plain=plain, approval=approval, policy=policy, replay=replay)
    if resume:
        try:
            session.open_existing(resume)
        except FileNotFoundError as exc:
            console.print(f"[red]{exc}[/]")
            raise typer.Exit(2)
        session.continue_run()
    elif spec is not None:
        session.open_new(load_spec_or_exit(spec))
        session.console.print("type /help for commands; Ctrl-C stops the agent after the current step")
        session.continue_run()
    else:
        session.console.print("no run yet: /resume RUN_ID, or restart with a SPEC.yaml")
    session.loop()


app.command("batch")(batch)
app.command("eval")(eval_cmd)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # python -m msmigrate.faces.cli (same as the `msmigrate` script)
    app()
