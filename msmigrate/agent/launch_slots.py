"""Accelerator launch slots shared by the item processes of one batch.

Each batch item is its own process, so the semaphore is a set of lock files (``fcntl.flock``) in the batch dir:
holding ``slot-<i>.lock`` = holding slot i. The kernel drops a lock when its holder dies, so a killed item never
leaks a slot. The batch exports the folder and the count to its items through the environment."""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

SLOTS_DIR_ENV = "MSMIGRATE_LAUNCH_SLOTS_DIR"
SLOTS_COUNT_ENV = "MSMIGRATE_LAUNCH_SLOTS"


def slot_env(slots_dir: Path, count: int) -> dict[str, str]:
    return {SLOTS_DIR_ENV: str(Path(slots_dir).resolve()), SLOTS_COUNT_ENV: str(count)}


@contextmanager
def launch_slots(timeout_s: float | None = None, poll_s: float = 0.5) -> Iterator[int | None]:
    """Hold one launch slot for the duration of the block; yields its index (None when no batch limits launches).

    Raises TimeoutError when ``timeout_s`` passes without a free slot."""
    folder, count = os.environ.get(SLOTS_DIR_ENV), int(os.environ.get(SLOTS_COUNT_ENV, "0") or 0)
    if not folder or count <= 0:
        yield None
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        for i in range(count):
            fh = open(Path(folder) / f"slot-{i}.lock", "a+")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.close()
                continue
            try:
                fh.seek(0)
                fh.truncate()
                fh.write(f"{os.getpid()}\n")
                fh.flush()
                yield i
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
                fh.close()
            return
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"no free launch slot among {count} in {folder} after {timeout_s}s")
        time.sleep(poll_s)
