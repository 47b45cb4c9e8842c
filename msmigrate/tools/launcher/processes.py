"""Every process a launch started, found again and ended — torchrun's ranks included.

The launch's process group is not enough: torchrun starts each rank in a session of its own, so when the agent
AND the launch supervisor die (an OOM kill of both, a power-cycled login shell), killing the recorded group stops
torchrun but leaves the ranks training. Two independent marks find them again:

- a **tag** in the environment: every launch attempt gets a random ``MSMIGRATE_LAUNCH_TAG``; children inherit it
  (bash, torchrun and torchrun's ranks pass their environment on), and ``/proc/<pid>/environ`` keeps what a process
  was started with. Found even for a rank born after the agent died.
- the **process tree** recorded while the launch runs: (pid, start time) of every descendant, journaled when it
  first appears. The start time makes a recycled pid harmless.
"""

from __future__ import annotations

import secrets
import time
from typing import Iterable

import psutil

TAG_ENV = "MSMIGRATE_LAUNCH_TAG"
TERM_GRACE_S = 5.0  # SIGTERM first (a rank may flush its log), SIGKILL after this
RECORD_EVERY_S = 1.0
_SAME_START_S = 0.05  # psutil's start times come from clock ticks since boot: equal up to rounding


def new_tag() -> str:
    return secrets.token_hex(8)


def tree(root_pid: int) -> list[tuple[int, float]]:
    """(pid, start time) of ``root_pid`` and all its living descendants; empty when it is gone."""
    try:
        root = psutil.Process(root_pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return []
    out = []
    for p in procs:
        try:
            out.append((p.pid, p.create_time()))
        except psutil.Error:
            continue
    return out


class TreeRecorder:
    """Polled from the launch's watch loop: the descendants not seen before, at most once a second."""

    def __init__(self, root_pid: int):
        self.root_pid = root_pid
        self.seen: set[tuple[int, float]] = set()
        self._next = 0.0

    def new(self, force: bool = False) -> list[tuple[int, float]]:
        now = time.monotonic()
        if not force and now < self._next:
            return []
        self._next = now + RECORD_EVERY_S
        fresh = [entry for entry in tree(self.root_pid) if entry not in self.seen]
        self.seen.update(fresh)
        return fresh


def _tagged(tag: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(TAG_ENV) == tag:
                out.append(p)
        except psutil.Error:  # another user's process, or one that just ended
            continue
    return out


def _recorded(entries: Iterable[Iterable]) -> list[psutil.Process]:
    out = []
    for pid, started in entries:
        try:
            p = psutil.Process(int(pid))
            if abs(p.create_time() - float(started)) <= _SAME_START_S:
                out.append(p)
        except psutil.Error:
            continue
    return out


def find(tag: str | None, recorded: Iterable[Iterable] = (), extra_pids: Iterable[int] = ()) -> list[psutil.Process]:
    """The living processes of one launch attempt: carrying its tag, or recorded with the same start time, or
    ``extra_pids`` (members of its process group, checked by the caller). Never this process itself."""
    found: dict[int, psutil.Process] = {}
    for p in [*(_tagged(tag) if tag else []), *_recorded(recorded)]:
        found[p.pid] = p
    for pid in extra_pids:
        try:
            found.setdefault(int(pid), psutil.Process(int(pid)))
        except psutil.Error:
            continue
    found.pop(psutil.Process().pid, None)
    return [p for p in found.values() if _alive(p)]


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def end(procs: list[psutil.Process], grace_s: float = TERM_GRACE_S) -> tuple[list[int], list[int]]:
    """SIGTERM every process, SIGKILL those still there after ``grace_s``, wait for them to go.

    Returns (pids ended, pids still alive afterwards: a process stuck in the kernel, say — the caller must not
    relaunch next to them)."""
    ended = [p.pid for p in procs]
    for p in procs:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, left = psutil.wait_procs(procs, timeout=grace_s)
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            pass
    _, left = psutil.wait_procs(left, timeout=5.0)
    return ended, [p.pid for p in left if _alive(p)]
