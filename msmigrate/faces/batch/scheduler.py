"""Runs the manifest: N agent slots (threads, each supervising one item process), M launch slots (lock files the
gates take), a durable state file, per-item logs, and a live progress table.

Isolation: every item is a separate ``python -m msmigrate.faces.batch.item`` process; whatever it does — fails a
gate, raises, is killed — becomes that item's ``exit_status`` and the batch goes on."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.live import Live
from rich.table import Table

from msmigrate.agent.state import EXIT_STOPPED
from msmigrate.faces.batch.item import item_lock
from msmigrate.faces.batch.manifest import BatchItem, load_manifest
from msmigrate.faces.batch.progress import item_progress
from msmigrate.agent.launch_slots import slot_env
from msmigrate.faces.batch.state import BatchState, ItemState, new_item_run_id
from msmigrate.faces.batch.summary import write_summary
from msmigrate.faces.chat.render import make_console

# Headroom over the spec's own wall budget before the batch kills an item process (the run stops itself first).
KILL_MARGIN_S = 600.0
ENDED = ("done", "interrupted")  # an item process has ended with one of these


@dataclass
class BatchResult:
    summary: dict[str, Any]
    error: str | None = None
    interrupted: bool = False  # Ctrl-C: the items it stopped resume when the same command runs again


def _wait_for_survivor(result_file: Path, say) -> bool:
    """True after waiting out a process of this item that outlived an earlier batch (kill -9 of the batch leaves
    its item processes running); False when none holds the item's lock."""
    lock = item_lock(result_file)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            lock.seek(0)
            say(f"{result_file.stem}: its process from an earlier batch (pid {lock.read().strip() or '?'}) still "
                "runs; waiting for it instead of starting a second copy")
        fcntl.flock(lock, fcntl.LOCK_EX)  # blocks until that process ends
        return True
    finally:
        lock.close()


def _run_one(item: BatchItem, state: BatchState, batch_dir: Path, env: dict[str, str],
             say=lambda text: None, procs: dict[str, subprocess.Popen] | None = None,
             stop: threading.Event | None = None) -> None:
    st = state.update(item.id, status="running", started=time.time())
    spec_file = batch_dir / "specs" / f"{item.id}.yaml"
    result_file = batch_dir / "results" / f"{st.run_id}.json"
    log_file = batch_dir / "logs" / f"{st.run_id}.log"
    _wait_for_survivor(result_file, say)
    if result_file.is_file():  # finished by a process that outlived an earlier batch: its result is the item's
        _record(item, state, result_file, 0, log_file)
        return
    argv = [sys.executable, "-m", "msmigrate.faces.batch.item", str(spec_file), st.run_id, str(batch_dir / "runs"),
            str(result_file)]
    limit = item.spec.budgets.wall_seconds + KILL_MARGIN_S
    with open(log_file, "a") as log:
        log.write(f"\n=== {time.strftime('%H:%M:%S')} {' '.join(argv)}\n")
        log.flush()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL)
        if procs is not None:
            procs[item.id] = proc  # the batch stops it on Ctrl-C
        if stop is not None and stop.is_set():  # Ctrl-C came while it was starting
            proc.terminate()
        try:
            rc: int | None = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = None
    _record(item, state, result_file, rc, log_file, limit)


def _record(item: BatchItem, state: BatchState, result_file: Path, rc: int | None, log_file: Path,
            limit: float = 0.0) -> None:
    """The item's outcome. A run stopped by the user, or an item process ended by a signal (Ctrl-C of the batch,
    which reaches the items too; a kill) proved nothing either way: the item stays ``interrupted`` and the next
    batch run resumes it from its checkpoint. A process that ran past the wall budget is done (error)."""
    if result_file.is_file():
        result = yaml.safe_load(result_file.read_text())  # JSON is YAML
        status = "interrupted" if result.get("exit_status") == EXIT_STOPPED else "done"
        state.update(item.id, status=status, ended=time.time(), exit_status=result.get("exit_status"),
                     exit_detail=result.get("exit_detail", ""), result=result)
    elif rc is None:
        state.update(item.id, status="done", ended=time.time(), exit_status="error",
                     exit_detail=f"item process killed after {limit:.0f} s (wall budget + margin); see {log_file}")
    elif rc < 0:
        state.update(item.id, status="interrupted", ended=time.time(), exit_status="interrupted",
                     exit_detail=f"item process ended by signal {-rc}; a re-run of the batch resumes it")
    else:
        state.update(item.id, status="done", ended=time.time(), exit_status="error",
                     exit_detail=f"item process ended with code {rc} and no result; see {log_file}")


def _table(items: list[BatchItem], state: BatchState, batch_dir: Path) -> Table:
    table = Table(title=f"batch {batch_dir.name}")
    for col in ("item", "status", "phase", "gates", "elapsed s", "exit"):
        table.add_column(col)
    for it in items:
        st = state.get(it.id)
        prog = item_progress(batch_dir / "runs" / st.run_id / "trajectory.jsonl")
        elapsed = "" if not st.started else f"{(st.ended or time.time()) - st.started:.0f}"
        table.add_row(it.id, st.status, prog.get("phase", ""), " ".join(prog.get("gates", [])), elapsed,
                      str(st.exit_status or ""))
    return table


def run_batch(manifest_path: Path, batch_dir: Path, *, jobs: int = 2, launch_jobs: int = 1, redo: bool = False,
              console: Console | None = None) -> BatchResult:
    console = console or make_console(stderr=True)
    manifest = load_manifest(manifest_path)
    if manifest.error:
        return BatchResult({}, manifest.error)
    batch_dir = Path(batch_dir).resolve()
    for sub in ("specs", "results", "logs", "runs", "launch_slots"):
        (batch_dir / sub).mkdir(parents=True, exist_ok=True)
    lock = open(batch_dir / ".batch.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return BatchResult({}, f"another batch process is working in {batch_dir}")
    state = BatchState(batch_dir / "batch_state.json")
    items = manifest.items  # items sharing a target need no clone: each run works in its own git worktree
    todo: list[BatchItem] = []
    for it in items:
        st = state.get(it.id)
        if redo and st.status != "pending":
            st = state.update(it.id, status="pending", attempt=st.attempt + 1, exit_status=None, exit_detail="",
                              result={}, started=None, ended=None, run="")
        if st.status == "done":
            continue
        if not st.run and st.status == "pending":  # a fresh attempt: its own run id, never one in use elsewhere
            st = state.update(it.id, run=new_item_run_id(it.id, st.attempt))
        spec = it.spec.model_copy(update={"approval": False})  # nobody to ask in a batch
        (batch_dir / "specs" / f"{it.id}.yaml").write_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False))
        todo.append(it)
    state.save()
    skipped = len(items) - len(todo)
    console.print(f"batch {batch_dir}: {len(items)} items, {skipped} already done, {len(todo)} to run "
                  f"({jobs} agent slots, {launch_jobs} launch slots)")
    env = {**os.environ, **slot_env(batch_dir / "launch_slots", launch_jobs)}
    procs: dict[str, subprocess.Popen] = {}
    interrupted, stop = False, threading.Event()
    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="batch-item") as pool:
        say = lambda text: console.print(f"  {text}")  # noqa: E731
        futures = [pool.submit(_run_one, it, state, batch_dir, env, say, procs, stop) for it in todo]
        try:
            _show_progress(items, todo, futures, state, batch_dir, console)
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
            for fut in futures:
                fut.cancel()  # items not started yet stay pending
            for proc in list(procs.values()):  # a Ctrl-C sent to the batch alone reaches its items here
                if proc.poll() is None:
                    proc.terminate()
            console.print("  interrupted: stopping the running items (each resumes from its checkpoint)")
            for fut in futures:
                if not fut.cancelled():
                    fut.exception()  # wait for the item to be recorded
        for f in futures:
            if not f.cancelled():
                f.result()  # a supervisor thread's own bug should surface, not vanish
    summary = write_summary(batch_dir, [state.get(it.id) for it in items])
    fcntl.flock(lock, fcntl.LOCK_UN)
    lock.close()
    return BatchResult(summary, interrupted=interrupted)


def _show_progress(items: list[BatchItem], todo: list[BatchItem], futures: list, state: BatchState,
                   batch_dir: Path, console: Console) -> None:
    """Until every item's process has ended: a live table on a terminal, one line per status change elsewhere."""
    if console.is_terminal:
        with Live(_table(items, state, batch_dir), console=console, refresh_per_second=2) as live:
            while not all(f.done() for f in futures):
                time.sleep(0.5)
                live.update(_table(items, state, batch_dir))
            live.update(_table(items, state, batch_dir))
        return
    reported: set[str] = set()
    while True:
        for it in todo:
            st = state.get(it.id)
            key = f"{it.id}:{st.status}"
            if key not in reported:
                reported.add(key)
                console.print(f"  {it.id} ({st.run_id}): {st.status}"
                              + (f" → {st.exit_status}" if st.status == "done" else ""))
        if all(f.done() for f in futures) and all(state.get(it.id).status in ENDED for it in todo):
            break
        time.sleep(0.5)
