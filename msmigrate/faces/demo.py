"""``msmigrate demo``: a bundled known model into a freshly generated stand-in target, rules policy, all gates,
offline, no LLM, no accelerator (the distributed gate runs 2 CPU ranks over gloo)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.runner import Run, new_run_id


def prepare_workdir(model: str, workdir: Path) -> tuple[Path, Path]:
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.standin import write_standin

    workdir = workdir.resolve()
    target = workdir / "target"
    if target.exists():  # every demo starts from the pristine baseline
        shutil.rmtree(target)
    write_standin(target)
    source = workdir / "sources" / model
    if not (source / "config.json").is_file():
        build_source(model, source)
    return source, target


def run_demo(model: str, workdir: Path, on_event: Callable[[str, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    source, target = prepare_workdir(model, workdir)
    spec = RunSpec(source=source, target=target, model_name=model, policy="rules")
    settings = Settings(runs_dir=workdir.resolve() / "runs")
    with Run(spec, new_run_id(model), settings, on_event=on_event) as run:
        return run.drive()
