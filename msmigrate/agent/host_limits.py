"""G0: host resource limits a trainer rank would run under, from the env probe's ``rank_limits`` (the limit of a
process started with the variables the launcher gives each rank, so a limit set for trainer ranks only is seen).

Why here: a limit that is too low does not fail any check before training; it fails a long run later, at an
unpredictable place (a data loader worker, a checkpoint shard, a collective's socket) with ``Too many open files``.
The floor is the kernel's own default soft limit for open files (1024, ``INR_OPEN_CUR``): every login session and
service starts there unless someone lowered it, while the trainer's loader workers, the process group's sockets,
the dataset's shards and the checkpoint files each hold descriptors. It is an environment fault: the user raises
the limit on the host (or in the launch script with ``ulimit -n`` up to the hard limit)."""

from __future__ import annotations

from typing import Any

NOFILE_FLOOR = 1024  # the Linux default soft RLIMIT_NOFILE (include/uapi/linux/fs.h INR_OPEN_CUR)


def limit_problems(runtime: dict[str, Any] | None) -> list[str]:
    """G0 problems for the limits the env probe read in a rank's view; [] when it read none."""
    limits = (runtime or {}).get("rank_limits") or {}
    soft, hard = limits.get("nofile_soft"), limits.get("nofile_hard")
    if not isinstance(soft, int) or soft < 0 or soft >= NOFILE_FLOOR:  # -1: unlimited
        return []
    if isinstance(hard, int) and (hard < 0 or hard >= NOFILE_FLOOR):
        how = (f"raise it for the ranks: `ulimit -n {hard if hard >= 0 else 65536}` at the top of the launch script "
               f"(the hard limit allows it), or the host's LimitNOFILE / nofile setting")
    else:
        how = (f"the hard limit is {hard} too: raise the host's limit (systemd LimitNOFILE=, "
               f"/etc/security/limits.conf nofile, or the container's --ulimit nofile=)")
    return [f"[open-files-limit] the open-file limit a trainer rank gets is {soft} (RLIMIT_NOFILE soft {soft}, "
            f"hard {hard}), below the kernel's default {NOFILE_FLOOR}: the trainer's data loader workers, process "
            f"group sockets, dataset shards and checkpoint files would run out of descriptors ('Too many open "
            f"files'); {how}"]
