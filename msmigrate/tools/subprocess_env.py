"""The one environment and spawn shape every child process of msmigrate gets (probes, launches); git gets an even
smaller allow-list with hooks, fsmonitor and every other configured program off (``core/git.py``).

Children run code msmigrate did not write — the target framework, the source's ``trust_remote_code`` files, and the
model-written plugin — so they get an **allow-listed** environment, never the agent's own: no API keys, no cloud
credentials, nothing the user did not name. What is kept is what the target runtime needs to find itself and its
accelerator: the process basics (PATH, HOME, LANG, TMPDIR …), Python's own variables, the Ascend CANN toolkit
(``ASCEND_*``, ``HCCL_*``, ``LD_LIBRARY_PATH`` set by CANN's ``set_env.sh`` …), CUDA device selection, torch's
threading/allocator knobs, the Hugging Face offline switches and caches, and MindSpeed-MM's ``NON_MEGATRON``.
A spec adds more names with ``env_passthrough`` (exact names or ``PREFIX_*``). A name that looks like a credential
is dropped even when a prefix rule would keep it; only an exact name in ``env_passthrough`` lets it through.

``spawn`` is what every probe and launch uses: the scrubbed env, its own session/process group (so a timeout kills
the whole tree), led by a tiny supervisor (``supervise.py``) that carries a parent-death signal and stops the whole
group when the agent dies, so a kill -9 of the agent leaves no probe, torchrun or rank behind. ``child_env`` and
``spawn_kwargs`` are the parts, for a launcher that manages its children itself (a fork server).
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Mapping

from msmigrate.core.secret_mask import looks_secret

# Exact names kept from the agent's environment.
ALLOWED_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "TEMP", "TMP",
    "PWD", "HOSTNAME", "NO_COLOR", "COLUMNS",
    "LD_LIBRARY_PATH",  # CANN's set_env.sh and conda environments put the runtime's libraries here
    "PYTHONPATH", "PYTHONHOME", "PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING",
    "PYTHONWARNINGS", "PYTHONFAULTHANDLER", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "KMP_AFFINITY",
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "NVIDIA_VISIBLE_DEVICES",
    "NON_MEGATRON", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NNODES", "NODE_RANK",
    "NPUS_PER_NODE", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME",
    "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HOME", "HF_HUB_CACHE",
    "HF_DATASETS_CACHE", "TRANSFORMERS_CACHE", "HF_MODULES_CACHE", "TOKENIZERS_PARALLELISM",
    "HF_HUB_DISABLE_TELEMETRY", "XDG_CACHE_HOME", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
    "MSMIGRATE_CANN_SET_ENV",  # where env_probe looks for CANN's set_env.sh
})
# Prefixes kept: the Ascend stack, collective libraries, torch's own knobs, this project's probe settings.
ALLOWED_PREFIXES = ("ASCEND_", "HCCL_", "HCCN_", "CANN_", "ATB_", "TORCH_", "PYTORCH_", "NCCL_", "GLOO_", "TE_",
                    "LC_", "MSMIGRATE_PROBE_", "MINDSPEED_", "SLURM_", "SBATCH_", "SRUN_", "SALLOC_")
# Never passed, even when named: they make bash or the dynamic loader run extra code in every child.
NEVER = frozenset({"BASH_ENV", "ENV", "LD_PRELOAD", "LD_AUDIT", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "PS4",
                   "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONBREAKPOINT"})

_passthrough: list[str] = []  # the spec's env_passthrough, set for this process by the runner


def set_passthrough(names: Iterable[str]) -> None:
    """Names (or ``PREFIX_*``) the user wants every child to see (spec ``env_passthrough``)."""
    _passthrough[:] = [str(n) for n in names if str(n).strip()]


def _kept(name: str, passthrough: Iterable[str]) -> bool:
    if name in NEVER or name.startswith("BASH_FUNC_"):
        return False
    named = list(passthrough)
    if name in named or name in ALLOWED_NAMES:
        return True
    if looks_secret(name):
        return False
    if name.startswith(ALLOWED_PREFIXES):
        return True
    return any(p.endswith("*") and name.startswith(p[:-1]) for p in named)


def child_env(extra: Mapping[str, str] | None = None, *, base: Mapping[str, str] | None = None,
              passthrough: Iterable[str] | None = None) -> dict[str, str]:
    """The environment for a child: allow-listed names of ``base`` (default ``os.environ``) plus ``extra``.

    ``extra`` is msmigrate's own settings for the child (PYTHONPATH, NON_MEGATRON, device selection, a launch's
    spec env); it is applied last but still cannot set a ``NEVER`` variable."""
    src = os.environ if base is None else base
    names = list(_passthrough if passthrough is None else passthrough)
    env = {k: v for k, v in src.items() if _kept(k, names)}
    for k, v in (extra or {}).items():
        if k in NEVER or str(k).startswith("BASH_FUNC_"):
            raise ValueError(f"environment variable {k} is never passed to a child process")
        env[str(k)] = str(v)
    return env


# ------------------------------------------------------------------------------------------- orphans: parent death

PR_SET_PDEATHSIG = 1
try:  # loaded in the parent: the child, between fork and exec, only calls it
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:
    _libc = None


def _set_parent_death_signal(sig: int) -> None:
    """prctl(PR_SET_PDEATHSIG): the kernel sends ``sig`` to this child when the thread that spawned it dies —
    including a kill -9 of the agent. Linux only; elsewhere a no-op (the resume reaper still cleans up)."""
    try:
        if _libc is not None:
            _libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _preexec(sig: int):
    parent = os.getpid()

    def run() -> None:  # runs in the child between fork and exec: async-signal-safe calls only
        _set_parent_death_signal(sig)
        if os.getppid() != parent:  # the agent died before prctl took effect
            os.kill(os.getpid(), sig)

    return run


def spawn_kwargs(extra_env: Mapping[str, str] | None = None, *, death_signal: int = signal.SIGTERM) -> dict:
    """``Popen`` keyword arguments for every child: scrubbed env, own session (process group), parent-death signal.

    For a child that is not wrapped by ``supervised`` (a fork server's own children, say) the signal only reaches
    that child, not its descendants: prefer ``spawn``."""
    return {"env": child_env(extra_env), "start_new_session": True, "preexec_fn": _preexec(death_signal)}


SUPERVISOR = Path(__file__).with_name("supervise.py")


def supervised(argv: list[str]) -> list[str]:
    """``argv`` run under the process-group supervisor (``supervise.py``), which stops the whole group when the
    agent dies."""
    return [sys.executable, "-I", "-S", str(SUPERVISOR), *argv]


def spawn(argv: list[str], *, env_extra: Mapping[str, str] | None = None, **popen_kwargs) -> subprocess.Popen:
    """The one way msmigrate starts a child that runs target/model code (probes, launches): allow-listed env, own
    process group led by the supervisor, parent-death signal — so no secret reaches it and nothing outlives a
    kill -9 of the agent. ``popen_kwargs``: stdout/stderr/stdin/cwd/text as for ``Popen``."""
    return subprocess.Popen(supervised(list(argv)), **spawn_kwargs(env_extra), **popen_kwargs)


def unsupervised_argv(cmdline: list[str]) -> list[str]:
    """The command a ``/proc/<pid>/cmdline`` of a supervised child runs (for matching recorded argv on resume)."""
    if len(cmdline) >= 4 and cmdline[1:3] == ["-I", "-S"] and cmdline[3] == str(SUPERVISOR):
        return cmdline[4:]
    return cmdline
