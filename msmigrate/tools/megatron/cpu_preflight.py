"""What the CPU preflight of the real Megatron route needs before the real step (real_step.py) can run: whether this
target runtime can build the model here at all, and the delivered weight conversion actually run.

``real_build_readiness``: a probe, not a path guess: the runtime, started in the target root with msmigrate's CPU
shim on its path (the launch-time patches, tools/megatron_cpu), imports ``megatron.core`` and the
``megatron.training`` entry points the real step calls (``initialize_megatron``, ``get_model``: Megatron-LM's, which
no PyPI wheel ships). The project's stand-in and a real checkout
without Megatron-LM's ``megatron/`` fail it, and the route keeps its plain launch.

``run_conversion``: the exact command convert_command.py hands the user (the target's own converter, ``hf_to_mm``
on the source's folder), run with the two changes a one-process CPU step needs, each named in
``ConversionRun.changed``: ``mm_dir`` a folder of the run (not the checkout) and one rank (tp_size 1, the per-stage
layer lists folded to one stage). A console script the runtime does not have installed runs as the module the
target's ``pyproject.toml`` maps it to (``python -m checkpoint.convert_cli``), said in the record.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron.convert_command import ConversionCommand
from msmigrate.tools.megatron.real_step import SHIM_SITE
from msmigrate.tools.runtime import run_process

CONVERT_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TQDM_DISABLE": "1"}
# what the real step calls (probes/megatron_real_step.py): Megatron-LM's initialize and get_model; a package named
# megatron without them (the project's stand-in ships a few modules of that name) cannot build the model
_READY = ("import sys, megatron.core as c; from megatron.training.initialize import initialize_megatron; "
         "from megatron.training.training import get_model; "
          "print('MEGATRON_CORE', getattr(c, '__version__', '?'), c.__file__); "
          "print('TORCH_NPU', sys.modules['torch_npu'].__file__ if 'torch_npu' in sys.modules else '-')")


@dataclass
class Readiness:
    ok: bool = False
    reason: str = ""  # why the model cannot be built here (empty when it can)
    facts: dict[str, Any] = field(default_factory=dict)  # megatron.core's version and file, the torch_npu loaded

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def shim_env(target: Path) -> dict[str, str]:
    """The launched process's path: the shim's sitecustomize first, then the target root (its ``megatron/``)."""
    return {"PYTHONPATH": f"{SHIM_SITE}:{Path(target).resolve()}"}


def real_build_readiness(runtime_python: str, target: Path, *, timeout: float = 120.0) -> Readiness:
    if not (SHIM_SITE / "sitecustomize.py").is_file():
        return Readiness(reason=f"msmigrate's CPU shim is missing ({SHIM_SITE})")
    out = run_process([runtime_python, "-c", _READY], cwd=target, env_extra=shim_env(target), timeout=timeout)
    return readiness_of(out.returncode, out.stdout, out.stderr, timed_out=out.timed_out)


def readiness_of(returncode: int, stdout: str, stderr: str, *, timed_out: bool = False) -> Readiness:
    """The verdict on the readiness probe's output (kept apart so it is tested on recorded outputs)."""
    if timed_out:
        return Readiness(reason="the runtime's import of megatron.core under the CPU shim timed out")
    found = dict(line.split(" ", 1) for line in stdout.splitlines() if line.startswith(("MEGATRON_CORE ", "TORCH_NPU ")))
    if returncode != 0 or "MEGATRON_CORE" not in found:
        last = (stderr.strip().splitlines() or [f"exit {returncode}"])[-1]
        return Readiness(reason=f"the target runtime does not import Megatron-LM's initialize_megatron / get_model under the CPU shim: {last}")
    version, _, where = found["MEGATRON_CORE"].partition(" ")
    return Readiness(ok=True, facts={"megatron_core": version, "megatron_core_file": where,
                                     "torch_npu": found.get("TORCH_NPU", "-")})


@dataclass
class ConversionRun:
    ok: bool = False
    command: str = ""  # what ran, as a shell line
    delivered: str = ""  # the command the report hands the user (at the launch's TP, into the script's --load)
    mm_dir: str = ""  # where this run's conversion wrote
    changed: dict[str, Any] = field(default_factory=dict)  # what the one-process run changed from the delivered one
    returncode: int | None = None
    seconds: float = 0.0
    log_tail: str = ""
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def one_stage(value: str) -> str:
    """A per-virtual-stage list of per-stage layer counts folded to one stage: ``[[2,2]]`` -> ``[[4]]``."""
    try:
        stages = json.loads(value)
    except ValueError:
        return value
    if isinstance(stages, list) and all(isinstance(v, list) and all(isinstance(n, int) for n in v) for v in stages):
        return json.dumps([[sum(sum(v) for v in stages)]], separators=(",", ":"))
    return value


def one_process_argv(command: str, mm_dir: Path, runtime_python: str, tp: int = 1) -> tuple[list[str], dict[str, Any]]:
    """(argv, {what: (delivered, here)}) of the delivered conversion for one CPU process writing to ``mm_dir``, into
    ``tp`` tensor-parallel shards (1 for the one-process step; the CPU launch at TP=2 loads 2)."""
    argv, changed = shlex.split(command), {}
    want = {"--cfg.mm_dir": str(mm_dir), "--cfg.parallel_config.tp_size": str(tp)}
    for i, tok in enumerate(argv[:-1]):
        new = want.get(tok) or (one_stage(argv[i + 1]) if tok.endswith(("llm_pp_layers", "vit_pp_layers")) else None)
        if new is not None and new != argv[i + 1]:
            changed[tok] = (argv[i + 1], new)
            argv[i + 1] = new
    bin_dir = Path(runtime_python).parent
    if argv[0] == "python":
        argv[0] = runtime_python
    elif not (bin_dir / argv[0]).is_file():  # the console script is not installed: the module it maps to
        changed["entry"] = (argv[0], "python -m checkpoint.convert_cli")
        argv = [runtime_python, "-m", "checkpoint.convert_cli", *argv[1:]]
    else:
        argv[0] = str(bin_dir / argv[0])
    return argv, changed


def run_conversion(runtime_python: str, target: Path, conv: ConversionCommand, mm_dir: Path, *,
                   timeout: float = 900.0, tp: int = 1) -> ConversionRun:
    if conv.error or not conv.command:
        return ConversionRun(error=conv.error or "no conversion command was formed")
    argv, changed = one_process_argv(conv.command, Path(mm_dir).resolve(), runtime_python, tp)
    res = ConversionRun(command=shlex.join(argv), delivered=conv.command, mm_dir=str(Path(mm_dir).resolve()),
                        changed=changed)
    t0 = time.time()
    out = run_process(argv, cwd=target, env_extra={**CONVERT_ENV, "PYTHONPATH": str(Path(target).resolve())},
                      timeout=timeout)
    res.returncode, res.log_tail = out.returncode, (out.stdout + out.stderr)[-3000:]
    if out.timed_out:
        res.error = f"the conversion timed out after {timeout:.0f}s"
    elif out.returncode != 0:
        res.error = f"the conversion exited {out.returncode}: {(out.stderr.strip().splitlines() or [''])[-1]}"
    elif not (Path(mm_dir) / "latest_checkpointed_iteration.txt").is_file():
        res.error = f"the conversion exited 0 but wrote no Megatron checkpoint in {mm_dir}"
    res.ok = res.error is None
    res.seconds = round(time.time() - t0, 1)
    return res
