"""Run a suite: for each task and trial, a fresh workspace (source fixture built once, target checkout fresh per
trial), one migration with the chosen policy, then the scorers on the run's folder. Trials already scored in
``results.jsonl`` are skipped, so an interrupted eval continues where it stopped (``redo`` starts over)."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from msmigrate.faces.run_hook import start_run
from msmigrate.agent.config import RunSpec, Settings
from msmigrate.faces.eval.scorers import Check, TrialScore, Validator, default_validator, score_run_dir
from msmigrate.faces.eval.suite import EvalTask, Suite

# (spec, run_id, settings) -> final state; the default starts a Run honouring the faces' test hook.
RunFn = Callable[[RunSpec, str, Settings], dict[str, Any]]


def default_run(spec: RunSpec, run_id: str, settings: Settings,
                on_event: Callable[[str, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    with start_run(settings, spec=spec, run_id=run_id, on_event=on_event) as run:
        return run.drive()


@dataclass
class EvalConfig:
    policy: str = "rules"
    trials: int | None = None  # None: the suite's
    workdir: Path = Path("eval_runs")
    replay_dir: Path | None = None  # <task_id>.jsonl or <task_id>/trajectory.jsonl per task (policy replay)
    redo: bool = False


def _source(task: EvalTask, workdir: Path) -> Path:
    if task.source is not None:
        return task.source
    from msmigrate.testbeds.fixtures import build_source

    dest = workdir / "sources" / task.fixture
    if not (dest / "config.json").is_file():
        build_source(task.fixture, dest)
    return dest.resolve()


def _target(task: EvalTask, workdir: Path, trial: int) -> Path:
    dest = workdir / "targets" / f"{task.id}-t{trial}"
    if dest.exists():
        shutil.rmtree(dest)
    if task.target == "standin":
        from msmigrate.testbeds.standin import write_standin

        return write_standin(dest)
    if task.target == "megatron_standin":
        from msmigrate.testbeds.megatron_standin import write_megatron_standin

        return write_megatron_standin(dest, with_assets=False)
    subprocess.run(["git", "clone", "-q", "--local", task.target, str(dest)], check=True, capture_output=True)
    return dest.resolve()


def _replay_file(task: EvalTask, replay_dir: Path | None) -> Path | None:
    if replay_dir is None:
        return None
    for cand in (replay_dir / f"{task.id}.jsonl", replay_dir / task.id / "trajectory.jsonl"):
        if cand.is_file():
            return cand.resolve()
    return None


def task_spec(task: EvalTask, source: Path, target: Path, cfg: EvalConfig) -> RunSpec:
    raw = {**task.spec, "source": str(source), "target": str(target), "model_name": task.model_name,
           "policy": cfg.policy, "approval": False}
    replay = _replay_file(task, cfg.replay_dir)
    if replay is not None:
        raw["replay_trajectory"] = str(replay)
    return RunSpec.model_validate(raw)


def _done_trials(results: Path) -> dict[tuple[str, int], dict[str, Any]]:
    if not results.is_file():
        return {}
    rows = [json.loads(ln) for ln in results.read_text().splitlines() if ln.strip()]
    return {(r["task_id"], r["trial"]): r for r in rows}


def _from_row(row: dict[str, Any]) -> TrialScore:
    return TrialScore(**{**row, "checks": [Check(**c) for c in row["checks"]]})


def run_suite(suite: Suite, cfg: EvalConfig, *, run_fn: RunFn = default_run, validate: Validator = default_validator,
              on_trial: Callable[[TrialScore], None] | None = None,
              on_start: Callable[[str, int, str, Path], None] | None = None) -> list[TrialScore]:
    """``on_start(task_id, trial, run_id, run_dir)`` before each trial runs, ``on_trial(score)`` after it (and for a
    trial already scored in results.jsonl, which is not run again)."""
    workdir = Path(cfg.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    results = workdir / "results.jsonl"
    if cfg.redo and results.exists():
        results.unlink()
    done = _done_trials(results)
    settings = Settings(runs_dir=workdir / "runs")
    trials = cfg.trials or suite.trials
    scores: list[TrialScore] = []
    for task in suite.tasks:
        for trial in range(trials):
            if (task.id, trial) in done:
                scores.append(_from_row(done[(task.id, trial)]))
                if on_trial:
                    on_trial(scores[-1])
                continue
            run_id = f"{task.id}-t{trial}-{secrets.token_hex(2)}"
            started = time.time()
            if on_start:
                on_start(task.id, trial, run_id, settings.runs_dir / run_id)
            if cfg.policy == "replay" and _replay_file(task, cfg.replay_dir) is None:
                score = TrialScore(task.id, trial, run_id, None, False, None,
                                   [Check("replay_available", False, f"no recorded trajectory for {task.id}")], {},
                                   error=f"no trajectory for {task.id} in {cfg.replay_dir}")
            else:
                spec = task_spec(task, _source(task, workdir), _target(task, workdir, trial), cfg)
                run_fn(spec, run_id, settings)
                score = score_run_dir(settings.runs_dir / run_id, task.expect, task_id=task.id, trial=trial,
                                      validate=validate, wall_s=time.time() - started)
            with open(results, "a") as fh:
                fh.write(json.dumps(score.to_dict(), default=str) + "\n")
            scores.append(score)
            if on_trial:
                on_trial(score)
    return scores
