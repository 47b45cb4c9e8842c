"""``msmigrate`` command line, the one module that registers every face: run, verify, demo, fixtures,
validate-config, chat, batch and eval (batch and eval keep their options in their own packages)."""

from __future__ import annotations

import contextlib
import json
import shlex
import signal
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from msmigrate.agent.config import RunSpec, Settings
from msmigrate.faces.batch.cli import batch
from msmigrate.faces.chat.render import EventPrinter, make_console
from msmigrate.faces.eval.cli import eval_cmd
from msmigrate.faces.user_errors import check_policy, user_error

# Usage errors and tracebacks keep rich's boxes only on a terminal: in a pipe or CI log they are click's plain lines,
# never folded to COLUMNS (an option name or path in an error stays whole and greppable).
_ON_TERMINAL = sys.stderr.isatty()
# Help in a pipe is not folded either: click wraps help to the terminal width (80 when it cannot tell); with no
# terminal the width is unbounded, so each paragraph and option row comes out as one line. Sub-commands inherit it.
_UNWRAPPED = {} if sys.stdout.isatty() else {"terminal_width": 10**6, "max_content_width": 10**6}
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode="rich" if _ON_TERMINAL else None,
                  context_settings=_UNWRAPPED,
                  pretty_exceptions_enable=_ON_TERMINAL,
                  help="Migrate multimodal models into MindSpeed-MM's FSDP2 plugin route, with proof.")
fixtures_app = typer.Typer(no_args_is_help=True, help="Generate the stand-in target and known-model source fixtures.")
app.add_typer(fixtures_app, name="fixtures")
console = make_console(stderr=True)


# Exit codes of the headless commands (run, verify, demo). needs_accelerator is not a failure: every gate that can
# run here passed and the rest needs an Ascend machine, so it has a code of its own.
EXIT_CODES = {"success": 0, "failed": 1, "usage": 2, "awaiting_approval": 3, "needs_accelerator": 4,
              "interrupted": 130}


def exit_code(status: str | None) -> int:
    """A run's exit status as the process exit code: every status that is not its own code is a failure (1)."""
    return EXIT_CODES[status] if status in ("success", "awaiting_approval", "needs_accelerator") else EXIT_CODES["failed"]


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"msmigrate {version('msmigrate')}")
        except PackageNotFoundError:  # a checkout run without installing it
            print("msmigrate (not installed: no version metadata)")
        raise typer.Exit(0)


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Migrate multimodal models into MindSpeed-MM's FSDP2 plugin route, with proof."""


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
        raise user_error(f"invalid spec {spec}: {exc}")


def open_run(make):
    """``make()`` builds a Run; the mistakes a user can make there (an unknown run id, a runs dir that cannot be
    written) become one line instead of a traceback."""
    from msmigrate.agent.input_checks import InputError

    try:
        return make()
    except InputError as exc:  # a spec that cannot run (replay without a trajectory, no such interpreter …)
        raise user_error(f"invalid spec: {exc}")
    except FileNotFoundError as exc:
        raise user_error(str(exc))
    except OSError as exc:
        raise user_error(f"cannot write the run folder {exc.filename or ''}: {exc.strerror or exc}; "
                         "choose another with --runs-dir DIR (or MSMIGRATE_RUNS_DIR)")


def _start(spec: Optional[RunSpec], settings: Settings, resume: Optional[str] = None):
    """A new run of ``spec``, or the run ``resume`` reopened (the faces' test hook applies)."""
    from msmigrate.faces.run_hook import start_run

    return start_run(settings, spec=None if resume else spec, run_id=resume, on_event=_progress_printer)


def resume_command(r, approve: bool = True) -> str:
    """The exact command that continues ``r`` (approving its pending launch with ``approve``), from any folder (the
    runs dir spelt out, absolute)."""
    line = f"msmigrate run --resume {r.run_id} --runs-dir {shlex.quote(str(Path(r.settings.runs_dir).resolve()))}"
    return line + (" --approve" if approve else "")


@contextlib.contextmanager
def _sigterm_as_stop():
    """SIGTERM (a scheduler's time limit, ``timeout``, ``kill``) stops a headless run the way Ctrl-C does: the
    report and evidence are written and the resume command printed, where the default action left neither."""
    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _drive_headless(r, resume_value: Optional[dict] = None) -> None:
    """Drive a run to its end, print the JSON summary on stdout, exit 0 only on success.

    With ``approval: true`` and nobody at a terminal to ask, the run stops at the approval (running the code it
    wrote, before G1; the training launches, before G4) with exit status ``awaiting_approval`` (exit code 3) and one
    line saying what waits and the command that approves it."""
    console.print(f"run {r.run_id} → {r.run_dir}")
    try:
        with _sigterm_as_stop():
            state = r.drive(_cli_approver if r.spec.approval and sys.stdin.isatty() else None,
                            resume_value=resume_value)
    except KeyboardInterrupt:  # Ctrl-C: the last finished step is checkpointed; say exactly how to go on
        r.close()
        console.print(f"\n[yellow]stopped[/]: run {r.run_id} resumes from its last finished step with: "
                      f"{escape(resume_command(r, approve=False))}", highlight=False)
        raise typer.Exit(EXIT_CODES["interrupted"])
    r.close()
    summary = _summary(state)
    pending = state.get("interrupt")
    if pending is not None:
        launch = ", ".join(f"{k}={v}" for k, v in (pending.get("launch") or {}).items())
        what = launch or pending.get("what", "")  # a code_execution approval (before G1) has no launch settings
        hint = "(or --reject; --set KEY=VALUE edits the launch)" if launch else "(or --reject)"
        console.print(f"[yellow]awaiting approval[/]: {pending.get('kind')} of {', '.join(pending.get('gates', []))} "
                      f"({escape(what)}); approve and continue with: {resume_command(r)} {hint}")
        summary.update(pending=pending, approve_command=resume_command(r))  # exit_status: awaiting_approval
    print(json.dumps(summary, indent=2))
    raise typer.Exit(exit_code("awaiting_approval" if pending is not None else state.get("exit_status")))


def _summary(state: dict) -> dict:
    return {
        "run_id": state.get("run_id"), "exit_status": state.get("exit_status"), "exit_detail": state.get("exit_detail"),
        "gates": {g: r.get("passed") for g, r in sorted(state.get("gates", {}).items())},
        "report": state.get("artifacts", {}).get("report"), "counters": state.get("counters", {}),
    }


def _answer(approve: bool, reject: bool, edits: list[str], pending: Optional[dict]) -> Optional[dict]:
    """The resume value for a pending approval from --approve / --reject / --set, checked like the chat's edit."""
    if not (approve or reject or edits):
        return None
    if pending is None:
        raise user_error("this run is not waiting for an approval; resume it without --approve/--reject/--set")
    if approve and reject:
        raise user_error("give --approve or --reject, not both")
    if reject:
        return {"action": "reject"}
    if not edits:
        return {"action": "approve"}
    if pending.get("launch") is None:
        raise user_error(f"--set edits launch settings; the pending approval is {pending.get('kind')}: "
                         "answer it with --approve or --reject")
    from msmigrate.faces.chat.session import parse_edit

    parsed = parse_edit(list(edits), pending.get("launch") or {})  # one --set is one KEY=VALUE, spaces and all
    if isinstance(parsed, str):
        raise user_error(parsed)
    return {"action": "edit", "launch": parsed}


SOURCE_STEP_HELP = ("FILE.py:function, your source's own training step — function(model, batch) -> loss (or "
                    "function(model, micro_batches, settings) for the whole loop) — the source side of G4's training "
                    "parity where the source has no loss or training code of its own (overrides the spec's "
                    "source_step)")


def with_source_step(s: RunSpec, source_step: Optional[str]) -> RunSpec:
    """``--source-step`` over the spec's ``source_step``, its file relative to the working directory; checked with
    the rest of the spec before the run starts (``Run`` → ``input_checks.spec_problem``)."""
    if not source_step:
        return s
    from msmigrate.tools.source_step import resolve_ref

    return s.model_copy(update={"source_step": resolve_ref(source_step, Path.cwd())})


@app.command()
def run(
    spec: Optional[Path] = typer.Argument(None, help="run spec YAML (source, target, model_name, policy, budgets …)"),
    resume: Optional[str] = typer.Option(None, "--resume", help="continue the run with this id"),
    policy: Optional[str] = typer.Option(None, help="override the spec's policy: rules | llm | replay"),
    runs_dir: Optional[Path] = typer.Option(None, help="where runs/<run_id>/ go (env MSMIGRATE_RUNS_DIR)"),
    approve: bool = typer.Option(False, "--approve", help="with --resume: approve the pending launch and continue"),
    reject: bool = typer.Option(False, "--reject", help="with --resume: reject the pending launch (the run ends)"),
    set_: Optional[list[str]] = typer.Option(None, "--set", metavar="KEY=VALUE",
                                             help="with --resume: approve with this launch edit (repeatable)"),
    source_step: Optional[str] = typer.Option(None, "--source-step", metavar="FILE.py:FUNCTION",
                                              help=SOURCE_STEP_HELP),
) -> None:
    """Headless single migration; prints a JSON summary on stdout. Exit code 0 success, 1 failed, 2 a usage error,
    3 waiting for an approval (``approval: true``; continue with --resume ID --approve), 4 needs_accelerator (every
    gate that can run here passed; the rest needs an Ascend machine), 130 stopped by Ctrl-C (the resume command is
    printed)."""
    check_policy(policy)
    settings = settings_for(runs_dir)
    if resume:
        if source_step:
            raise user_error("--source-step starts a run: a resumed run keeps the step it started with")
        r = open_run(lambda: _start(None, settings, resume))
        try:
            answer = _answer(approve, reject, set_ or [], r.pending_interrupt())
        except typer.Exit:
            r.close()
            raise
        _drive_headless(r, answer)
    elif spec is not None:
        if approve or reject or set_:
            raise user_error("--approve/--reject/--set answer a paused run: use them with --resume RUN_ID")
        s = load_spec_or_exit(spec)
        if policy:
            s = s.model_copy(update={"policy": policy})
        s = with_source_step(s, source_step)
        _drive_headless(open_run(lambda: _start(s, settings)))
    else:
        raise user_error("give a SPEC.yaml or --resume RUN_ID")


@app.command()
def verify(
    spec: Path = typer.Argument(..., help="run spec naming source, target and model_name of an existing migration"),
    runs_dir: Optional[Path] = typer.Option(None, help="where runs/<run_id>/ go (env MSMIGRATE_RUNS_DIR)"),
    model_id: Optional[str] = typer.Option(None, help="model_register id (default: the spec's, else model_name)"),
    plugin_dir: Optional[str] = typer.Option(None, help="plugin package relative to the target root"),
    config: Optional[str] = typer.Option(None, help="the YAML to verify, relative to the target root"),
    launch_script: Optional[str] = typer.Option(None, help="its launch script, relative to the target root"),
    bind_inputs: bool = typer.Option(True, help="rebind the YAML's model/data paths to the spec's source/data "
                                     "(a per-run copy; the YAML is not edited)"),
    source_step: Optional[str] = typer.Option(None, "--source-step", metavar="FILE.py:FUNCTION",
                                              help=SOURCE_STEP_HELP),
) -> None:
    """The gates alone (G0–G6) on a checkout that already holds a migration; edits nothing."""
    s = load_spec_or_exit(spec)
    given = {"model_id": model_id, "plugin_dir": plugin_dir, "config": config, "launch_script": launch_script}
    s = s.model_copy(update={**{k: v for k, v in given.items() if v}, "bind_inputs": bind_inputs})
    s = with_source_step(s, source_step)
    # one repair round is pointless without a policy: a failing gate ends the run at its second look
    s = s.model_copy(update={"policy": "none", "budgets": s.budgets.model_copy(update={"phase_attempts": 1})})
    _drive_headless(open_run(lambda: _start(s, settings_for(runs_dir))))


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
    raise typer.Exit(exit_code(state.get("exit_status")))


@fixtures_app.command("target")
def fixtures_target(
    dest: Path,
    backend: str = typer.Option("fsdp2", "--backend", help="fsdp2: the plugin-route stand-in (mindspeed_mm/fsdp); "
                                "megatron: the Megatron-route stand-in (pretrain_vlm.py, model JSONs, converters)"),
) -> None:
    """Write a stand-in MindSpeed-MM checkout (git-initialised) into DEST."""
    if backend == "megatron":
        from msmigrate.testbeds.megatron_standin import write_megatron_standin

        print(write_megatron_standin(dest))
        return
    if backend != "fsdp2":
        console.print(f"[red]unknown backend {escape(backend)}[/]; known: fsdp2, megatron")
        raise typer.Exit(2)
    from msmigrate.testbeds.standin import write_standin

    print(write_standin(dest))


@fixtures_app.command("source")
def fixtures_source(
    name: str,
    dest: Path,
    for_runtime: Optional[str] = typer.Option(None, "--for-runtime", help="build inside this Python (the target "
                                              "runtime), so its transformers can read the folder"),
    realscale: bool = typer.Option(False, "--realscale", help="the published model's configuration with 2 layers "
                                   "per tower (GBs of random weights in several shards) instead of the tiny one"),
) -> None:
    """Build the tiny offline source model NAME into DEST (or its real-scale variant)."""
    from msmigrate.testbeds.fixtures import FIXTURES
    from msmigrate.testbeds.fixtures.realscale import REALSCALE

    known = REALSCALE if realscale else sorted(FIXTURES)
    if name not in known:
        console.print(f"[red]unknown {'real-scale ' if realscale else ''}fixture {name}[/]; known: {', '.join(known)}")
        raise typer.Exit(2)
    if for_runtime:
        from msmigrate.testbeds.fixtures.in_runtime import build_source_in_runtime

        try:
            print(build_source_in_runtime(name, dest, for_runtime, timeout=1800.0 if realscale else 600.0,
                                          realscale=realscale))
        except (RuntimeError, OSError) as exc:
            console.print(f"[red]{exc}[/]", markup=False)
            raise typer.Exit(1)
        return
    if realscale:
        from msmigrate.testbeds.fixtures.realscale import build_realscale_source

        print(build_realscale_source(name, dest))
        return
    from msmigrate.testbeds.fixtures import build_source

    print(build_source(name, dest))


@fixtures_app.command("list")
def fixtures_list() -> None:
    """The bundled known-model fixtures: family, and which policy migrates each on which route (from the eval suites
    `msmigrate eval default|megatron` scores), tab-separated with a header line."""
    from msmigrate.faces.eval.coverage import fixture_routes

    print("fixture\tfamily\tfsdp2 route (eval default)\tmegatron route (eval megatron)")
    for row in fixture_routes():
        print("\t".join(row.cells()))


@app.command("validate-config")
def validate_config_cmd(
    config: Path = typer.Argument(..., help="a plugin-route YAML"),
    target: Path = typer.Option(..., help="the MindSpeed-MM checkout the YAML is for"),
    runtime_python: str = typer.Option(sys.executable, help="target runtime interpreter (for the schema probe)"),
    as_json: bool = typer.Option(False, "--json", help="print {ok, summary, entry_point, findings} as JSON on stdout"),
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
    if as_json:
        print(json.dumps({"ok": result.ok, "config": str(config), "summary": result.data.get("summary", result.error),
                          "entry_point": result.data.get("entry_point"),
                          "findings": result.data.get("findings", [])}, indent=2))
        raise typer.Exit(0 if result.ok else 1)
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

    check_policy(policy)
    session = ChatSession(settings_for(runs_dir), plain=plain, approval=approval, policy=policy, replay=replay)
    if resume:
        open_run(lambda: session.open_existing(resume))
        session.continue_run()
    elif spec is not None:
        s = load_spec_or_exit(spec)
        open_run(lambda: session.open_new(s))
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
