"""``msmigrate batch MANIFEST.yaml --jobs N``."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from msmigrate.faces.chat.render import make_console


def batch(
    manifest: Path = typer.Argument(..., help="YAML: items (each a spec path or an inline spec, optional id)"),
    jobs: int = typer.Option(2, "--jobs", "-j", min=1, help="migrations at a time (agent slots)"),
    launch_jobs: int = typer.Option(1, "--launch-jobs", min=1, help="local training launches at a time (accelerator slots); launch.backend slurm items queue in the scheduler instead"),
    batch_dir: Optional[Path] = typer.Option(None, help="state, logs, runs and summary; default <manifest>.batch/"),
    redo: bool = typer.Option(False, "--redo", help="run finished items again (new attempt, new run id)"),
) -> None:
    """Many migrations, resumable: re-running the same command skips finished items and resumes interrupted ones."""
    from msmigrate.faces.batch.scheduler import run_batch
    from msmigrate.faces.batch.summary import markdown

    console = make_console(stderr=True)
    out_dir = batch_dir or manifest.with_suffix(".batch")
    result = run_batch(manifest, out_dir, jobs=jobs, launch_jobs=launch_jobs, redo=redo, console=console)
    if result.error:
        console.print(f"[red]{result.error}[/]")
        raise typer.Exit(2)
    console.print(markdown(result.summary))
    if result.interrupted:
        again = ["msmigrate", "batch", str(manifest), "--jobs", str(jobs), "--launch-jobs", str(launch_jobs),
                 "--batch-dir", str(Path(out_dir).resolve())]
        console.print("[yellow]interrupted[/]: the stopped items resume from their checkpoints with: "
                      + escape(shlex.join(again)), highlight=False)
        print(json.dumps(result.summary, indent=2, default=str))
        raise typer.Exit(130)
    console.print(f"summary: {Path(out_dir).resolve() / 'summary.json'}")
    print(json.dumps(result.summary, indent=2, default=str))
    raise typer.Exit(0 if result.summary["succeeded"] == result.summary["total"] else 1)
