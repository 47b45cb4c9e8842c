"""``msmigrate eval SUITE --policy rules|llm|replay --trials K``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from msmigrate.faces.chat.render import make_console
from msmigrate.faces.user_errors import check_policy


def eval_cmd(
    suite: str = typer.Argument("default", help="suite name (msmigrate/faces/eval/suites/NAME.yaml) or a suite YAML path"),
    policy: str = typer.Option("rules", help="rules | llm | replay"),
    trials: Optional[int] = typer.Option(None, "--trials", "-k", min=1, help="trials per task (default: the suite's)"),
    tasks_dir: Optional[Path] = typer.Option(None, help="folder of extra task YAML files (private held-out tasks)"),
    tasks: Optional[str] = typer.Option(None, help="comma-separated task ids to run (default: all)"),
    replay_dir: Optional[Path] = typer.Option(None, help="recorded trajectories per task (with --policy replay)"),
    workdir: Path = typer.Option(Path("eval_runs"), help="sources, targets, runs and results.jsonl of this eval"),
    label: Optional[str] = typer.Option(None, help="leaderboard row name (default: policy, plus the LLM model)"),
    leaderboard: Path = typer.Option(Path("eval_runs/leaderboard.json"), help="leaderboard JSON to update"),
    redo: bool = typer.Option(False, "--redo", help="ignore trials already scored in WORKDIR/results.jsonl"),
) -> None:
    """Score a policy on known models: hard checks, soft measures, pass@k, leaderboard (JSON + Markdown)."""
    from msmigrate.agent.config import Settings
    from msmigrate.faces.eval.progress import TrialWatch
    from msmigrate.faces.eval.leaderboard import build_entry, leaderboard_markdown, tasks_markdown, update_leaderboard
    from msmigrate.faces.eval.runner import EvalConfig, default_run, run_suite
    from msmigrate.faces.eval.suite import load_suite

    console = make_console(stderr=True)
    check_policy(policy, ("rules", "llm", "replay"))
    loaded = load_suite(suite, tasks_dir, [t.strip() for t in tasks.split(",")] if tasks else None)
    if loaded.error:
        console.print(f"[red]{loaded.error}[/]")
        raise typer.Exit(2)
    k = trials or loaded.trials
    console.print(f"suite {loaded.name}: {len(loaded.tasks)} tasks × {k} trials, policy {policy} → {workdir}")

    total, seen = len(loaded.tasks) * k, [0]
    # between "started" and the verdict: the run's phase and gates as they happen
    watch = TrialWatch(lambda line: console.print(f"    {line}", markup=False, highlight=False))

    def started(task_id, trial, run_id, run_dir) -> None:
        console.print(f"  [{seen[0] + 1}/{total}] {task_id} trial {trial}: started, run {run_id} → {run_dir}")
        watch.start(f"{task_id} trial {trial}", run_dir)

    def show(score) -> None:
        watch.stop()
        seen[0] += 1
        failed = [c.name for c in score.checks if not c.passed]
        mark = "[green]PASS[/]" if score.passed else "[red]FAIL[/]"
        console.print(f"  [{seen[0]}/{total}] {score.task_id} trial {score.trial}: {mark} {score.exit_status} "
                      f"{'failed: ' + ', '.join(failed) if failed else ''} ({score.soft.get('wall_s', 0)} s)")

    cfg = EvalConfig(policy=policy, trials=k, workdir=workdir / f"{loaded.name}-{policy}", replay_dir=replay_dir,
                     redo=redo)
    scores = run_suite(loaded, cfg, on_trial=show, on_start=started,
                       run_fn=lambda spec, run_id, settings: default_run(spec, run_id, settings, on_event=watch.event))
    name = label or (f"{policy}:{Settings().llm_model}" if policy == "llm" else policy)
    entry = build_entry(name, loaded.name, policy, scores, k)
    leaderboard.parent.mkdir(parents=True, exist_ok=True)
    entries = update_leaderboard(leaderboard, entry)
    md = "## Leaderboard\n\n" + leaderboard_markdown(entries) + f"\n## {name} on {loaded.name}\n\n" + tasks_markdown(entry)
    leaderboard.with_suffix(".md").write_text(md)
    (Path(cfg.workdir) / "entry.json").write_text(json.dumps(entry, indent=2, default=str))
    print(md)
    console.print(f"leaderboard: {leaderboard.resolve()} and {leaderboard.with_suffix('.md').resolve()}; "
                  f"this eval's entry: {(Path(cfg.workdir) / 'entry.json').resolve()}")
    raise typer.Exit(0 if entry["overall"]["solved"] == entry["overall"]["tasks"] else 1)
