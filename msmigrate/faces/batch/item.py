"""One batch item in its own process: start or resume its run, drive it headless, write a result JSON.

    python -m msmigrate.faces.batch.item SPEC.yaml RUN_ID RUNS_DIR RESULT.json

A run whose folder already exists is resumed from its checkpoint (a batch killed mid-run loses no finished step).
The process holds ``RESULT.lock`` (an flock, with its pid inside) while it lives, so a re-run batch can tell an item
whose process survived a kill -9 of the batch from one that died, and never starts a second copy of it. Its progress
(the chat's event lines) goes to stdout, which the batch sends to the item's log."""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path

import yaml

from msmigrate.faces.chat.render import EventPrinter, make_console
from msmigrate.faces.run_hook import start_run
from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.input_checks import InputError
from msmigrate.agent.state import EXIT_PRECHECK


# Exit code of an item process that found another process of the same item alive (it did nothing).
ALREADY_RUNNING = 75


def item_lock(result_file: Path):
    """The item's lock file: taken by its process for its whole life; the pid in it says who holds it."""
    return open(result_file.with_suffix(".lock"), "a+")


def run_item(spec_file: Path, run_id: str, runs_dir: Path, result_file: Path) -> dict | None:
    lock = item_lock(result_file)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        print(f"another process (pid {lock.read().strip() or '?'}) is already running {run_id}; not starting a "
              "second copy", flush=True)
        return None
    lock.truncate(0)
    lock.write(str(os.getpid()))
    lock.flush()
    settings = Settings(runs_dir=runs_dir)
    spec = RunSpec.model_validate(yaml.safe_load(spec_file.read_text()))
    resumed = (runs_dir / run_id / "spec.yaml").is_file()  # then start_run reopens it with its own spec
    started = time.time()
    try:
        run = start_run(settings, spec=spec, run_id=run_id, on_event=EventPrinter(make_console(highlight=False)))
    except InputError as exc:  # checked before the run folder or the work tree exist: nothing to resume
        print(f"invalid spec: {exc}", flush=True)
        state, run_dir = {"exit_status": EXIT_PRECHECK, "exit_detail": f"invalid spec: {exc}"}, None
    else:
        with run:
            state = run.drive()  # approval is off in batches: no human to ask
        run_dir = str(run.run_dir)
    result = {
        "run_id": run_id, "run_dir": run_dir, "resumed": resumed,
        "exit_status": state["exit_status"],  # Run.drive always sets one (awaiting_approval at an unanswered pause)
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
    if run_item(Path(spec_arg), run_id_arg, Path(runs_arg), Path(result_arg)) is None:
        sys.exit(ALREADY_RUNNING)
