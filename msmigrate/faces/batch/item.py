"""One batch item in its own process: start or resume its run, drive it headless, write a result JSON.

    python -m msmigrate.faces.batch.item SPEC.yaml RUN_ID RUNS_DIR RESULT.json

A run whose folder already exists is resumed from its checkpoint (a batch killed mid-run loses no finished step)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import yaml

from msmigrate.faces.run_hook import run_overrides
from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.runner import Run


def run_item(spec_file: Path, run_id: str, runs_dir: Path, result_file: Path) -> dict:
    settings = Settings(runs_dir=runs_dir)
    spec = RunSpec.model_validate(yaml.safe_load(spec_file.read_text()))
    kw = {"on_event": lambda kind, data: None, **run_overrides(spec, run_id, settings)}
    resumed = (runs_dir / run_id / "spec.yaml").is_file()
    started = time.time()
    run = Run.resume(run_id, settings, **kw) if resumed else Run(spec, run_id, settings, **kw)
    try:
        state = run.drive()  # approval is off in batches: no human to ask
    finally:
        run.close()
    result = {
        "run_id": run_id, "run_dir": str(run.run_dir), "resumed": resumed,
        "exit_status": state.get("exit_status") or ("awaiting_approval" if state.get("interrupt") else "error"),
        "exit_detail": state.get("exit_detail", ""),
        "gates": {g: bool(r.get("passed")) for g, r in sorted((state.get("gates") or {}).items())},
        "counters": state.get("counters", {}), "report": (state.get("artifacts") or {}).get("report"),
        "wall_s": round(time.time() - started, 2),
    }
    tmp = result_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2, default=str))
    os.replace(tmp, result_file)
    return result


if __name__ == "__main__":
    spec_arg, run_id_arg, runs_arg, result_arg = sys.argv[1:5]
    run_item(Path(spec_arg), run_id_arg, Path(runs_arg), Path(result_arg))
