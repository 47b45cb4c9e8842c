"""Wall time of the demo migration with and without the warm target runtime, per probe and per launch.

    python benchmarks/bench_gates.py                  # qwen2_vl, cold then warm, in this one process
    python benchmarks/bench_gates.py --model llava --order warm,cold

Each mode runs the whole demo (``msmigrate demo``, ``msmigrate.faces.demo``: rules policy, a fresh stand-in target, gates G0–G6) in this
process. Every probe (``run_probe``) and every launch (``launch``) is timed at its call, so a warm probe's time
includes the server start it may have paid; the launches are real torchrun runs in both modes (the warm runtime
serves probes only). The table pairs the i-th call of each probe/launch in both modes and prints the ratio.

Targets (issue 19): probe time >= 3x lower warm than cold; the whole warm demo <= 45 s on 2 cores. The machine's load
average is printed before each mode: figures on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from msmigrate.tools import runtime
from msmigrate.tools.launcher import run as launcher_run
from msmigrate.tools.warm_runtime import SWITCH_ENV


class Recorder:
    """Wraps ``run_probe`` and ``launch`` wherever a loaded msmigrate module holds them (robust to module moves)."""

    def __init__(self):
        # (kind, name, seconds, how) of the current mode; a launch's seconds exclude the probes it ran itself (its
        # device detection), which are listed as probes — so probes + launches + the rest add up to the whole run
        self.calls: list[tuple[str, str, float, str]] = []
        self._inner: list[float] = []  # probe seconds accumulated inside the launch that is running

    def _wrap(self, kind, original, name_of):
        def timed(*args, **kwargs):
            if kind == "launch":
                self._inner.append(0.0)
            start = time.monotonic()
            try:
                res = original(*args, **kwargs)
            finally:
                secs = time.monotonic() - start
                inner = self._inner.pop() if kind == "launch" else 0.0
                if kind == "probe" and self._inner:
                    self._inner[-1] += secs
            how = res.data.get("runtime_mode", "") if kind == "probe" else ("reused" if res.data.get("reused") else "")
            self.calls.append((kind, name_of(args, kwargs), secs - inner, how))
            return res

        timed.__wrapped__ = original
        return timed

    def install(self):
        """Once per process; ``calls`` is emptied per mode by the caller."""
        originals = {"run_probe": runtime.run_probe, "launch": launcher_run.launch}
        wrappers = {"run_probe": self._wrap("probe", originals["run_probe"],
                                            lambda a, k: a[1] if len(a) > 1 else k["probe"]),
                    "launch": self._wrap("launch", originals["launch"],
                                         lambda a, k: (a[1] if len(a) > 1 else k["spec"]).gate)}
        for mod in list(sys.modules.values()):
            if not getattr(mod, "__name__", "").startswith("msmigrate"):
                continue
            for attr, original in originals.items():
                if getattr(mod, attr, None) is original:
                    setattr(mod, attr, wrappers[attr])


def load_all_modules() -> None:
    """Import every msmigrate module first, so that each one holding ``run_probe`` / ``launch`` gets wrapped."""
    import msmigrate

    for info in pkgutil.walk_packages(msmigrate.__path__, prefix="msmigrate."):
        try:
            importlib.import_module(info.name)
        except Exception as exc:  # boundary: a module that needs an optional extra is not one that runs probes here
            print(f"(skipped {info.name}: {type(exc).__name__})", file=sys.stderr)


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def run_mode(mode: str, model: str, workdir: Path, rec: Recorder) -> dict[str, Any]:
    """One demo in ``mode``; a fresh target and runs dir each time (the source fixture is built once)."""
    from msmigrate.faces.demo import run_demo

    os.environ[SWITCH_ENV] = "1" if mode == "warm" else "0"
    rec.calls = []
    print(f"[{mode}] load average {load_average()} (cores: {os.cpu_count()})", file=sys.stderr, flush=True)
    start = time.monotonic()
    state = run_demo(model, workdir)
    total = time.monotonic() - start
    gates = {g: bool(r.get("passed")) for g, r in (state.get("gates") or {}).items()}
    print(f"[{mode}] {state.get('exit_status')} in {total:.1f} s; gates {gates}", file=sys.stderr, flush=True)
    return {"total": total, "calls": list(rec.calls), "exit_status": state.get("exit_status"), "gates": gates}


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-call median over rounds (calls paired by position: every round makes the same calls when green)."""
    calls = []
    for i, call in enumerate(runs[0]["calls"]):
        secs = [r["calls"][i][2] for r in runs if i < len(r["calls"]) and r["calls"][i][:2] == call[:2]]
        calls.append((call[0], call[1], statistics.median(secs), call[3]))
    bad = next((r["exit_status"] for r in runs if r["exit_status"] != "success"), "success")
    return {"total": statistics.median(r["total"] for r in runs), "calls": calls, "exit_status": bad}


def paired(results: dict[str, dict], kind: str) -> list[tuple[str, dict[str, float], dict[str, str]]]:
    """Rows ``name#i`` with the i-th call of that name in each mode."""
    rows: dict[str, dict[str, float]] = defaultdict(dict)
    modes: dict[str, dict[str, str]] = defaultdict(dict)
    order: list[str] = []
    for mode, res in results.items():
        seen: dict[str, int] = defaultdict(int)
        for k, name, secs, how in res["calls"]:
            if k != kind:
                continue
            seen[name] += 1
            key = f"{name}#{seen[name]}"
            if key not in order:
                order.append(key)
            rows[key][mode] = secs
            modes[key][mode] = how
    return [(key, rows[key], modes[key]) for key in order]


def ratio(cold: float | None, warm: float | None) -> str:
    return f"{cold / warm:.1f}×" if cold and warm else "—"


def table(results: dict[str, dict]) -> str:
    lines = ["| call | cold s | warm s | cold / warm | how (warm run) |", "|---|---|---|---|---|"]
    sums = {}
    for kind in ("probe", "launch"):
        total = {m: 0.0 for m in results}
        for key, secs, how in paired(results, kind):
            for m in results:
                total[m] += secs.get(m, 0.0)
            c, w = secs.get("cold"), secs.get("warm")
            lines.append(f"| {kind} {key} | {c if c is None else f'{c:.2f}'} | {w if w is None else f'{w:.2f}'} | "
                         f"{ratio(c, w)} | {how.get('warm', '')} |")
        sums[kind] = total
        lines.append(f"| **all {kind}s** | {total.get('cold', 0):.2f} | {total.get('warm', 0):.2f} | "
                     f"{ratio(total.get('cold'), total.get('warm'))} | |")
    c, w = results.get("cold", {}).get("total"), results.get("warm", {}).get("total")
    lines.append(f"| **whole demo** | {c or 0:.2f} | {w or 0:.2f} | {ratio(c, w)} | |")
    rest = {m: results[m]["total"] - sums["probe"][m] - sums["launch"][m] for m in results}
    lines.append(f"| agent's own work (rest) | {rest.get('cold', 0):.2f} | {rest.get('warm', 0):.2f} | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2_vl")
    ap.add_argument("--order", default="cold,warm", help="modes in the order they run")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of --order; the table shows each call's median")
    ap.add_argument("--workdir", type=Path, help="default: a temporary directory")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    load_all_modules()
    rec = Recorder()
    rec.install()
    with tempfile.TemporaryDirectory(prefix="bench-gates-") as tmp:
        workdir = args.workdir or Path(tmp)
        from msmigrate.faces.demo import prepare_workdir

        prepare_workdir(args.model, workdir)  # the source fixture is built once, outside every timed run
        rounds = [{mode: run_mode(mode, args.model, workdir, rec) for mode in args.order.split(",")}
                  for _ in range(args.repeat)]
    results = {mode: median_run([r[mode] for r in rounds]) for mode in rounds[0]}
    print(table(results))
    bad = [m for m, r in results.items() if r["exit_status"] != "success"]
    if bad:
        print(f"not green: {bad}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    from results_md import recorded

    with recorded("bench_gates"):
        rc = main()
    sys.exit(rc)
