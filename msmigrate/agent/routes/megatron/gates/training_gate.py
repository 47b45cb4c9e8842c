"""Megatron route, training gate: the launch script itself, run where the route can run; otherwise a plain
"needs an accelerator" with what the CPU path could not prove.

First the import gate's check: if the entry's imports need modules this environment lacks (torch_npu, Megatron-LM
on a CPU machine), nothing is launched and the record is ``needs_accelerator`` with the missing modules and the
unproven claims below. If the imports work (the stand-in, or a machine with the accelerator stack), the script
runs under the target runtime's torchrun (``bash <script>``, MASTER_PORT set free) and passes on evidence only:
exit 0, one Megatron iteration line per ``--train-iters`` iteration, every logged loss finite.
"""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.agent.routes.megatron.gates.imports_gate import megatron_imports_record
from msmigrate.tools.launcher.command import free_port
from msmigrate.tools.megatron.launch_script import parse_launch_script
from msmigrate.tools.megatron.train_log import iteration_losses
from msmigrate.tools.runtime import run_process

# torchrun's summary of a rank that died by a signal: "exitcode  : -6 (pid: 20498)  (SIGABRT)"
_SIGNAL_DEATH = re.compile(r"exitcode\s*:\s*-(\d+) \(pid: \d+\)\s*\((SIG[A-Z]+)\)")
# where a native or Python failure starts saying why, ahead of torchrun's own summary
_WHY_START = re.compile(r"terminate called|Traceback \(most recent call last\)|\] Error|Error:|Aborted")

UNPROVEN_ON_CPU = ("the model builds from Megatron components at the script's TP/PP/CP sizes",
                   "the converted checkpoint loads into that model",
                   "a forward/backward step gives a finite loss that falls over iterations",
                   "tensor / pipeline / data parallel ranks agree")


def megatron_training_record(runtime_python: str, target: Path, script: str, *, entry: str = "pretrain_vlm.py",
                             timeout: float = 900.0, probe_timeout: float = 300.0) -> dict[str, Any]:
    imports = megatron_imports_record(runtime_python, target, entry, timeout=probe_timeout)
    if not imports["passed"]:
        why = (f"not run: {imports['summary']}" if imports["needs_accelerator"]
               else f"not run, the route does not import: {imports['summary']}")
        return {"gate": "training", "backend": "megatron", "passed": False,
                "needs_accelerator": imports["needs_accelerator"], "not_proven": list(UNPROVEN_ON_CPU),
                "summary": why + ". Not proven here: " + "; ".join(UNPROVEN_ON_CPU),
                "evidence": imports["evidence"], "failure_text": imports["failure_text"]}
    launch = parse_launch_script((Path(target) / script).read_text(encoding="utf-8"))
    want = launch.int_flag("--train-iters")
    bin_dir = str(Path(runtime_python).parent)
    t0 = time.time()
    out = run_process(["bash", script], cwd=target, timeout=timeout,
                      env_extra={"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                                 "MASTER_PORT": str(free_port())})
    log = out.stdout + out.stderr
    losses = iteration_losses(log)
    problems = []
    if out.timed_out:
        problems.append(f"{script} timed out after {timeout:.0f}s")
    elif out.returncode != 0:
        problems.append(f"{script} exited {out.returncode}")
    if want is not None and len({i for i, _, _ in losses}) != want:
        problems.append(f"{len({i for i, _, _ in losses})} iteration line(s) with a loss, --train-iters is {want}")
    if not losses:
        problems.append("no Megatron iteration line with a loss in the log")
    bad = [(i, v) for i, _, v in losses if not math.isfinite(v)]
    if bad:
        problems.append(f"non-finite loss at iteration(s) {[i for i, _ in bad][:5]}")
    signals = sorted({m.group(2) for m in _SIGNAL_DEATH.finditer(log)} - {"SIGTERM"})
    if signals and not out.timed_out:
        # torchrun's summary is all the tail shows of a native crash; name it, the head of the log says why
        problems.append(f"a rank died by {', '.join(signals)} (a crash in native code, not a Python exception)")
    ev = evidence_item("megatron launch", ["bash", script], out.returncode, t0, time.time(), log,
                       {"iterations": len(losses), "train_iters": want,
                        "losses": [v for _, _, v in losses][:50]})
    first, last = (losses[0][2], losses[-1][2]) if losses else (None, None)
    return {"gate": "training", "backend": "megatron", "passed": not problems, "needs_accelerator": False,
            "summary": "; ".join(problems) or f"{script}: {len(losses)} iterations, loss {first:.4g} -> {last:.4g}",
            "evidence": imports["evidence"] + [ev], "crashed_by_signal": signals,
            "failure_text": "\n".join(problems + _why_head(log) + [log[-3000:]]) if problems else ""}


def _why_head(log: str) -> list[str]:
    """The first lines that say why a launch failed, when they lie before the tail the record keeps."""
    m = _WHY_START.search(log)
    if m is None or m.start() >= len(log) - 3000:
        return []
    return ["first error in the log:", log[m.start():m.start() + 1500], "...", "end of the log:"]


def gate_megatron_training(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    plan, ctx = state["plan"], deps.ctx
    return megatron_training_record(ctx.runtime_python, ctx.target, plan["script_path"],
                                    entry=plan.get("entry") or "pretrain_vlm.py", probe_timeout=ctx.probe_timeout_s)
