"""Megatron route, the training slot on a real checkout whose runtime builds the model on this CPU (after the CPU
preflight passed, cpu_step_gate.py): ``torchrun`` of the target's own ``pretrain_vlm.py`` with the delivered model
JSON, data JSON and converted weights for a few iterations at TP=1 (one rank) and at TP=2 (two gloo ranks), under
msmigrate's CPU shim (tools/megatron/cpu_launch.py). The weights for TP=2 are the delivered conversion command run
at tp_size 2 (the target's converter); TP=1 loads the preflight's conversion.

Passes only when every launch exited 0, logged one loss per iteration, every loss finite and the last below the
first, and the log says the converted checkpoint loaded. A launch that stops on a torch_npu kernel the shim has no
CPU reference for is ``needs_accelerator`` naming that kernel; the other launch still runs and is recorded.

G5 (``cpu_reliability_record``) runs the TP=1 launch again and compares its losses with G4's; G6
(``cpu_distributed_record``) cites G4's two-rank launch.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.tools.megatron.convert_command import conversion_command
from msmigrate.tools.megatron.cpu_launch import CpuLaunch, cpu_launch
from msmigrate.tools.megatron.cpu_preflight import run_conversion
from msmigrate.tools.megatron.launch_script import parse_launch_script

CPU_TPS = (1, 2)  # the sizes the CPU launch covers: no model parallelism, and two tensor-parallel ranks
LAUNCH_TIMEOUT_S = 900.0
CONVERSION_TIMEOUT_S = 900.0


def launch_label(tp: int, ranks: int) -> str:
    return f"pretrain_vlm.py under torchrun on the CPU, TP={tp}, {ranks} gloo rank(s)"


def launch_evidence(res: CpuLaunch, t0: float) -> dict[str, Any]:
    return evidence_item(launch_label(res.tp, res.ranks), res.command, res.returncode, t0, time.time(),
                         "\n".join(res.problems + [res.log_tail]),
                         {"tp": res.tp, "ranks": res.ranks, "iterations": len(res.losses),
                          "losses": [v for _, v in res.losses], "load": res.load, "kernels": res.kernels,
                          "missing_kernel": res.missing_kernel,
                          "changed": {k: list(v) for k, v in res.changed.items()}})


def launch_summary(res: CpuLaunch) -> str:
    head = f"TP={res.tp} ({res.ranks} rank{'s' if res.ranks > 1 else ''})"
    if res.ok:
        return f"{head}: loss {res.losses[0][1]:.4f} -> {res.losses[-1][1]:.4f} over {len(res.losses)} iterations"
    return f"{head}: " + "; ".join(res.problems[:3])


def load_dirs(runtime_python: str, target: Path, source: Path, plan: dict[str, Any], script: str, model_json: str,
              pre: dict[str, Any], work_dir: Path) -> tuple[dict[int, str], list[dict[str, Any]], list[str]]:
    """{tp: converted checkpoint}: TP=1 the preflight's; any other TP the delivered conversion run at that tp_size."""
    dirs, ev, problems = {1: pre["conversion_run"]["mm_dir"]}, [], []
    for tp in CPU_TPS:
        if tp in dirs:
            continue
        conv = conversion_command(target, plan.get("converter"), model_json, script, source, tp,
                                  plan.get("converter_output"))
        t0 = time.time()
        ran = run_conversion(runtime_python, target, conv, Path(work_dir) / f"mm_tp{tp}", timeout=CONVERSION_TIMEOUT_S,
                             tp=tp)
        ev.append(evidence_item(f"weight conversion (target's converter, tp_size {tp})", ran.command or "not formed",
                                ran.returncode, t0, time.time(), ran.error or ran.log_tail, ran.to_dict()))
        if ran.ok:
            dirs[tp] = ran.mm_dir
        else:
            problems.append(f"the delivered conversion at tp_size {tp} did not run through: {ran.error}")
    return dirs, ev, problems


def cpu_training_record(runtime_python: str, target: Path, source: Path, plan: dict[str, Any], pre: dict[str, Any],
                        work_dir: Path) -> dict[str, Any]:
    meg = plan.get("megatron") or {}
    script = meg.get("script_path") or plan["script_path"]
    model_json = meg.get("model_json_path") or plan["model_json_path"]
    entry = meg.get("entry") or "pretrain_vlm.py"
    flags = parse_launch_script((Path(target) / script).read_text(encoding="utf-8")).flags
    dirs, evidence, problems = load_dirs(runtime_python, target, source, plan, script, model_json, pre, work_dir)
    launches: list[CpuLaunch] = []
    for tp in CPU_TPS:
        if tp not in dirs:
            continue
        t0 = time.time()
        res = cpu_launch(runtime_python, target, flags, tp=tp, ranks=tp, load=Path(dirs[tp]), entry=entry,
                         timeout=LAUNCH_TIMEOUT_S)
        launches.append(res)
        evidence.append(launch_evidence(res, t0))
    missing = [r for r in launches if not r.ok and r.missing_kernel]
    failed = [r for r in launches if not r.ok and not r.missing_kernel]
    problems += [f"TP={r.tp}: {p}" for r in failed for p in r.problems]
    parts = [launch_summary(r) for r in launches]
    changed = launches[0].changed if launches else {}
    ran = (f"torchrun {entry} on the CPU (the delivered model JSON, data JSON and converted weights; changed: "
           + ", ".join(f"{k} {v[0]} → {v[1]}" for k, v in changed.items() if k not in ("--load", "--save"))
           + "): " + "; ".join(parts))
    rec = {"gate": "G4", "backend": "megatron", "evidence": evidence, "launches": len(launches),
           "cpu_launches": [{k: v for k, v in r.to_dict().items() if k != "log_tail"} for r in launches]}
    if problems:
        return {**rec, "passed": False, "needs_accelerator": False, "summary": "; ".join([ran] + problems[:4]),
                "failure_text": "\n".join(problems + [r.log_tail for r in failed][:1])}
    if missing:
        why = "; ".join(f"the TP={r.tp} launch needs {r.missing_kernel}, for which msmigrate's CPU shim has no "
                        "reference (an NPU kernel)" for r in missing)
        return {**rec, "passed": False, "needs_accelerator": why, "summary": f"{ran}; {why}", "failure_text": ""}
    return {**rec, "passed": True, "needs_accelerator": False, "summary": ran, "failure_text": ""}


def cpu_reliability_record(runtime_python: str, target: Path, plan: dict[str, Any],
                           g4: dict[str, Any]) -> dict[str, Any]:
    """G5 on the CPU route: the TP=1 launch of G4 again (same seed, same weights); passes when its losses equal G4's."""
    first = next((r for r in g4.get("cpu_launches") or [] if r["tp"] == 1 and r["ok"]), None)
    if first is None:
        return {"gate": "G5", "backend": "megatron", "passed": False, "launches": 0, "evidence": [],
                "summary": "G4 has no passed TP=1 CPU launch to repeat", "failure_text": "no G4 launch to repeat"}
    meg = plan.get("megatron") or {}
    script = meg.get("script_path") or plan["script_path"]
    flags = parse_launch_script((Path(target) / script).read_text(encoding="utf-8")).flags
    t0 = time.time()
    res = cpu_launch(runtime_python, target, flags, tp=1, ranks=1, load=Path(first["load"]),
                     entry=meg.get("entry") or "pretrain_vlm.py", timeout=LAUNCH_TIMEOUT_S)
    before, again = [v for _, v in first["losses"]], [v for _, v in res.losses]
    problems = list(res.problems)
    if res.ok and again != before:
        problems.append(f"same seed, different losses: G4 {before} vs now {again}")
    return {"gate": "G5", "backend": "megatron", "passed": not problems, "launches": 1,
            "evidence": [launch_evidence(res, t0)], "failure_text": "\n".join(problems),
            "summary": "; ".join(problems) or f"the TP=1 CPU launch again: the same {len(again)} losses as G4 "
                                              f"({', '.join(f'{v:.6g}' for v in again)})"}


def cpu_distributed_record(g4: dict[str, Any]) -> dict[str, Any]:
    """G6 on the CPU route: G4's launch over two or more gloo ranks (cited, not run again)."""
    multi = [r for r in g4.get("cpu_launches") or [] if r["ranks"] >= 2]
    ok = bool(g4.get("passed")) and bool(multi) and all(r["ok"] for r in multi)
    cited = [e for e in g4.get("evidence") or [] if (e.get("metrics") or {}).get("ranks", 0) >= 2]
    summary = ("; ".join(f"G4's torchrun of pretrain_vlm.py at TP={r['tp']} over {r['ranks']} gloo ranks on the CPU "
                         f"(cited): loss {r['losses'][0][1]:.4f} -> {r['losses'][-1][1]:.4f}" for r in multi)
               + "; the delivered script's own sizes on the accelerator backend are not run here"
               if ok else "G4 ran no passing launch of two or more ranks")
    return {"gate": "G6", "backend": "megatron", "passed": ok, "summary": summary, "evidence": cited,
            "failure_text": "" if ok else summary}
