"""Replay a recorded live LLM run (tests/agent/recordings/*_relay.json) against another target, e.g. a real
MindSpeed-MM checkout, and say where the recorded play stops fitting it.

    python scripts/replay_on_target.py RECORDING WORK --target CHECKOUT --runtime-python PY

WORK gets a copy of CHECKOUT (``cp -a``: the run writes its work branch there), the fixture's source written by
PY's transformers (``msmigrate fixtures source NAME --for-runtime PY``), and the run folder. The recorded answers
are served over HTTP by phase, attempt and turn (tests/agent/fake_openai_server.py) whatever the target's tools
answer, so on a target other than the recorded one a tool call may fail where the live run's succeeded: the first
such call and the first gate verdict that differs are printed, with the exit status, the gate table and G4's
training-parity figures (one JSON object on stdout)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "agent"))


def parity_figures(evidence: dict) -> list[dict]:
    """G4's training-parity records (random init; real weights cut where the source has them), cut to the figures
    a report quotes."""
    out = []
    for item in (evidence.get("gates", {}).get("G4", {}).get("evidence") or []):
        tp = item.get("metrics") or {}
        if not (isinstance(tp.get("source"), dict) and isinstance(tp.get("target"), dict)):
            continue
        s, t = tp["source"], tp["target"]
        out.append({"label": item.get("label"), "status": tp.get("status"),
                    "steps": tp.get("steps"), "max_abs_dloss": tp.get("max_dloss"),
                    "max_rel_dgrad_norm": tp.get("max_rel_dgrad_norm"), "fixed_batch": tp.get("fixed_batch"),
                    "loss_first": [s["loss"][0], t["loss"][0]] if s.get("loss") and t.get("loss") else None,
                    "loss_last": [s["loss"][-1], t["loss"][-1]] if s.get("loss") and t.get("loss") else None,
                    "grad_groups": len(tp.get("grad_groups") or []), "weights": tp.get("weights"),
                    "problems": tp.get("problems"), "source_step": tp.get("source_step")})
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recording")
    ap.add_argument("work")
    ap.add_argument("--target", required=True, help="the checkout to copy (left untouched)")
    ap.add_argument("--runtime-python", required=True)
    ap.add_argument("--gate-train-iters", type=int, default=5)
    ap.add_argument("--adapted", action="store_true",
                    help="the play as tests/realmm/adapted_plays.py adapts it to the real framework (not blind)")
    args = ap.parse_args(argv)
    from live_recording import outcomes, replay

    rec = json.loads(Path(args.recording).read_text(encoding="utf-8"))
    if args.adapted:
        sys.path.insert(0, str(REPO / "tests" / "realmm"))
        from adapted_plays import ADAPTERS

        rec = ADAPTERS[rec["fixture"]](rec)
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    target = work / "MindSpeed-MM"
    if not target.exists():
        shutil.copytree(args.target, target, symlinks=True)
    source = work / "source"
    if not source.exists():
        subprocess.run([sys.executable, "-m", "msmigrate.faces.cli", "fixtures", "source", rec["fixture"], str(source),
                        "--for-runtime", args.runtime_python], check=True, timeout=900,
                       env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    out = replay(rec, work, f"{rec['fixture']}-{'adapted' if args.adapted else 'real-replay'}", source=source, target=target,
                 runtime_python=args.runtime_python, gate_train_iters=args.gate_train_iters)
    run_dir = out["run_dir"]
    records, tools, gates = outcomes(run_dir)
    live = rec["outcomes"]
    first_tool = next((i for i, (a, b) in enumerate(zip(tools, live["tools"])) if a != b), None)
    first_gate = next((i for i, (a, b) in enumerate(zip(gates, live["gates"])) if a[:2] != b[:2]), None)
    failed_call = None
    if first_tool is not None:
        calls = [r for r in records if r["kind"] == "tool"]
        failed_call = {"index": first_tool, "phase": calls[first_tool].get("phase"),
                       "name": calls[first_tool].get("name"), "args": str(calls[first_tool].get("args") or calls[first_tool].get("arguments"))[:400],
                       "result": str(calls[first_tool].get("result"))[:800]}
    evidence_path = run_dir / "evidence.json"
    evidence = json.loads(evidence_path.read_text()) if evidence_path.exists() else {}
    final = out["final"]
    report = {"fixture": rec["fixture"], "run_dir": str(run_dir), "exit_status": final.get("exit_status"),
              "exit_detail": str(final.get("exit_detail"))[:1500], "gates": gates, "live_gates": live["gates"],
              "requests": len(out["server"].requests), "live_requests": rec["recorded_from"]["requests"],
              "first_tool_divergence": failed_call,
              "first_gate_divergence": None if first_gate is None else {"replay": gates[first_gate],
                                                                        "live": live["gates"][first_gate]},
              "training_parity": parity_figures(evidence)}
    print(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
