"""G4's training parity in fp32 and in bf16 (``launch.parity_dtype``) on one migration, figures per step.

    python benchmarks/bench_training_parity_dtype.py WORK [--steps 20]
    python benchmarks/bench_training_parity_dtype.py WORK --from-run RUN_DIR --checkout CHECKOUT --runtime-python PY

The rules policy migrates qwen2_vl into a fresh stand-in (G0–G3, the launch refused, as
tests/agent/standin_migration.py), then the gate's own check (``training_parity_check``) runs twice on the delivered
target: fp32 and bf16, K steps each, same init and batches. Prints one JSON object: per dtype the per-step |Δloss|
(source vs migrated, both in that dtype), the relative grad-norm Δ, the step-1 per-group max relative Δgrad, the
fixed-batch fall, the verdict and the tolerances; and across dtypes the bf16 curve against the fp32 one (how far bf16
training itself moves from fp32 over K steps, the figure a bf16-on-NPU vs fp32-reference comparison would see).

``--from-run``: a finished run's own G4 training-parity probe (its argv from the run's evidence.json), re-run on a
fresh worktree of CHECKOUT at the run's work branch, once as recorded (fp32) and once with ``--dtype bf16``: e.g. a
migration into the real MindSpeed-MM."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "agent"))


def figures(record: dict) -> dict:
    src, tgt = record.get("source") or {}, record.get("target") or {}
    dloss = [abs(a - b) for a, b in zip(src.get("loss", []), tgt.get("loss", []))]
    rel = [d / max(1.0, abs(a)) for d, a in zip(dloss, src.get("loss", []))]
    dnorm = [abs(a - b) / max(1e-6, abs(a)) for a, b in zip(src.get("grad_norm", []), tgt.get("grad_norm", []))]
    return {"status": record.get("status"), "steps": record.get("steps"), "dtype": record.get("dtype"),
            "tolerance": record.get("tolerance"), "problems": record.get("problems"),
            "max_abs_dloss": max(dloss, default=None), "max_rel_dloss": max(rel, default=None),
            "per_step_abs_dloss": dloss, "max_rel_dgrad_norm": max(dnorm, default=None),
            "max_group_rel_dgrad": max((g["max_rel_dgrad"] for g in record.get("grad_groups") or []), default=None),
            "fixed_batch": record.get("fixed_batch"), "source_loss": src.get("loss"), "target_loss": tgt.get("loss"),
            "source_grad_norm": src.get("grad_norm"), "target_grad_norm": tgt.get("grad_norm")}


def probe_result(stdout: str) -> dict:
    from msmigrate.tools.probes._model_build import RESULT_MARKER

    line = next(ln for ln in reversed(stdout.splitlines()) if ln.startswith(RESULT_MARKER))
    return json.loads(line[len(RESULT_MARKER):])


def from_run(work: Path, run_dir: Path, checkout: Path, runtime_python: str) -> dict:
    """The run's G4 training-parity argv (random init), on a worktree of its branch, in fp32 and bf16."""
    import os
    import subprocess

    evidence = json.loads((run_dir / "evidence.json").read_text())
    item = next(e for e in evidence["gates"]["G4"]["evidence"]
                if e["label"].startswith("training parity") and "real weights" not in e["label"])
    argv = list(item["command"])
    tree = work / f"tree_{run_dir.name}"
    if not tree.exists():
        from msmigrate.core.git import git

        git(checkout, "worktree", "add", "-f", str(tree), f"msmigrate/{run_dir.name}")
    # the run's own worktree is gone once it ended: every path into it (--target, --config) points into the new one
    recorded = argv[argv.index("--target") + 1]
    argv = [a.replace(recorded, str(tree)) for a in argv]
    argv[0] = runtime_python
    env = {**os.environ, "NON_MEGATRON": "true", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = {"run": str(run_dir), "argv": argv}
    for dtype in ("fp32", "bf16"):
        proc = subprocess.run(argv + ([] if dtype == "fp32" else ["--dtype", dtype]), cwd=tree, env=env,
                              capture_output=True, text=True, timeout=2400)
        record = probe_result(proc.stdout)
        if "error" in record:
            raise RuntimeError(f"{dtype}: {record['error']}\n{proc.stderr[-2000:]}")
        record["status"] = "pass" if record.get("passed") else "fail"
        out[dtype] = {**figures(record), "probe_seconds": record.get("seconds")}
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("work")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--from-run", help="a finished run's folder (its G4 probe argv is re-run)")
    ap.add_argument("--checkout", help="with --from-run: the target checkout holding the run's work branch")
    ap.add_argument("--runtime-python", help="with --from-run: the target runtime's interpreter")
    args = ap.parse_args(argv)
    from standin_migration import copy_at_head, migrate_qwen2_vl

    from msmigrate.agent.routes.fsdp2.gates.parity import training_parity_check

    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if args.from_run:
        out = from_run(work, Path(args.from_run).resolve(), Path(args.checkout).resolve(), args.runtime_python)
        print(json.dumps({**out, **cross(out)}, indent=1))
        return 0
    migrated = migrate_qwen2_vl(work, {"gate_train_iters": 5, "parity_steps": args.steps})
    out: dict = {"fixture": "qwen2_vl", "target": "stand-in", "steps": args.steps}
    for dtype in ("fp32", "bf16"):
        deps, state = copy_at_head(migrated, f"dtype_{dtype}")
        deps.spec = deps.spec.model_copy(update={"launch": deps.spec.launch.model_copy(update={"parity_dtype": dtype})})
        ev, problems, record = training_parity_check(deps, state)
        out[dtype] = {**figures(record), "probe_seconds": record.get("probe_seconds")}
    print(json.dumps({**out, **cross(out)}, indent=1))
    return 0


def cross(out: dict) -> dict:
    """The bf16 curves against the fp32 ones (same init and batches)."""
    a, b = out["fp32"], out["bf16"]
    if not (a.get("target_loss") and b.get("target_loss")):
        return {}
    return {"bf16_vs_fp32": {
        "max_abs_dloss_target": max(abs(x - y) for x, y in zip(a["target_loss"], b["target_loss"])),
        "max_abs_dloss_source": max(abs(x - y) for x, y in zip(a["source_loss"], b["source_loss"])),
        "max_rel_dgrad_norm_target": max(abs(x - y) / max(1e-6, abs(x))
                                         for x, y in zip(a["target_grad_norm"], b["target_grad_norm"]))}}


if __name__ == "__main__":
    from results_md import recorded  # benchmarks/ is the script's own folder, first on sys.path

    with recorded("bench_training_parity_dtype"):
        rc = main(sys.argv[1:])
    sys.exit(rc)
