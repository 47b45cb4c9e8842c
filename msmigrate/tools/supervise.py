"""Process-group supervisor: ``python supervise.py CMD ARGS...`` — run as the direct child of the agent.

It is a standalone file (stdlib only, run with ``-I -S``) so it starts in milliseconds. It leads the child's process
group (the agent starts it in a new session) and carries the parent-death signal, so when the agent dies — even by
kill -9 — the kernel sends it SIGTERM and it stops the *whole* group: SIGTERM to every member (torchrun forwards it
to its ranks), then SIGKILL after a grace period. A plain parent-death signal on the command itself would not do: it
is not inherited by the command's children (a launch script's torchrun, torchrun's ranks).

A launch's command also carries an environment tag (``MSMIGRATE_LAUNCH_TAG``, see ``launcher/processes.py``) that
its descendants inherit: torchrun starts each rank in a session of its own, outside this group, so the stop also
signals every process carrying the tag — a rank is not left training when torchrun is killed after the grace.

The command's exit status is passed through unchanged (a signal death is re-raised on the supervisor, so the agent
sees the same negative return code as without it).
"""

import os
import signal
import sys
import time

GRACE_S = float(os.environ.get("MSMIGRATE_SUPERVISOR_GRACE_S", "10"))
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
TAG_ENV = "MSMIGRATE_LAUNCH_TAG"


def tagged(tag: str) -> list[int]:
    """Pids of other processes started with ``TAG_ENV=tag`` in their environment."""
    if not tag:
        return []
    me, mark, out = os.getpid(), f"{TAG_ENV}={tag}".encode(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if mark in fh.read().split(b"\0"):
                    out.append(int(name))
        except OSError:
            continue
    return out


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def others_in_group(group: int) -> bool:
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # state ppid pgrp ...
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == group:
            return True
    return False


def main() -> None:
    argv = sys.argv[1:]
    if not argv:
        sys.exit(2)
    child = [0]

    def stop(signum, frame):
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        group, tag = os.getpgrp(), os.environ.get(TAG_ENV, "")
        signal_all(tagged(tag), signal.SIGTERM)
        try:
            os.killpg(group, signal.SIGTERM)
        except ProcessLookupError:
            pass
        # Wait until every other member has gone (torchrun exits only after it stopped its ranks, which run in
        # sessions of their own), or the grace period ends; then SIGKILL whatever is left.
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline:
            try:
                os.waitpid(-1, os.WNOHANG)  # reap the command once it exits, so it stops counting
            except ChildProcessError:
                pass
            if not others_in_group(group) and not tagged(tag):
                break
            time.sleep(0.1)
        signal_all(tagged(tag), signal.SIGKILL)
        os.killpg(group, signal.SIGKILL)  # the rest of the group, this process included

    # Before these handlers exist, SIGTERM's default action ends this process, which has no child yet: no orphan.
    for s in STOP_SIGNALS:
        signal.signal(s, stop)
    try:
        child[0] = os.posix_spawnp(argv[0], argv, os.environ, setsigdef=STOP_SIGNALS)
    except OSError as exc:
        print(f"msmigrate supervisor: cannot start {argv[0]}: {exc}", file=sys.stderr, flush=True)
        sys.exit(127)
    _, status = os.waitpid(child[0], 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
