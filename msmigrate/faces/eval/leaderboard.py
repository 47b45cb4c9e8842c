"""Aggregate trials into pass@k with spread, and keep a leaderboard (JSON + Markdown) across policies / models.

pass@k is the unbiased estimator over n trials with c passes: 1 - C(n-c, k) / C(n, k)."""

from __future__ import annotations

import json
import statistics
import time
from math import comb
from pathlib import Path
from typing import Any

from msmigrate.faces.eval.scorers import TrialScore

SOFT_KEYS = ("launches", "policy_steps", "tool_calls", "tokens", "wall_s")


def pass_at_k(n: int, c: int, k: int) -> float:
    if n <= 0 or k <= 0:
        return 0.0
    k = min(k, n)
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "std": 0.0, "min": 0.0, "max": 0.0}
    return {"mean": round(statistics.fmean(values), 2), "std": round(statistics.pstdev(values), 2),
            "min": round(min(values), 2), "max": round(max(values), 2)}


def _counts(statuses) -> dict[str, int]:
    """Trials per exit status (``none``: the run left no evidence.json — it crashed or was killed)."""
    out: dict[str, int] = {}
    for status in statuses:
        out[str(status or "none")] = out.get(str(status or "none"), 0) + 1
    return dict(sorted(out.items()))


def exits_cell(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} ×{v}" for k, v in counts.items()) or "—"


def aggregate_task(scores: list[TrialScore], k: int) -> dict[str, Any]:
    n, c = len(scores), sum(1 for s in scores if s.passed)
    checks: dict[str, int] = {}
    for s in scores:
        for ch in s.checks:
            checks[ch.name] = checks.get(ch.name, 0) + (1 if ch.passed else 0)
    fails = [s.first_failing_gate for s in scores if s.first_failing_gate]
    return {
        "trials": n, "passed": c, "pass@1": round(pass_at_k(n, c, 1), 3), f"pass@{k}": round(pass_at_k(n, c, k), 3),
        "check_pass_rate": {name: round(v / n, 3) for name, v in checks.items()} if n else {},
        "first_failing_gate": max(set(fails), key=fails.count) if fails else None,
        "exit_statuses": sorted({str(s.exit_status) for s in scores}),
        "exit_status_counts": _counts(s.exit_status for s in scores),
        "soft": {key: _spread([s.soft.get(key, 0.0) for s in scores]) for key in SOFT_KEYS},
    }


def build_entry(label: str, suite: str, policy: str, scores: list[TrialScore], k: int) -> dict[str, Any]:
    by_task: dict[str, list[TrialScore]] = {}
    for s in scores:
        by_task.setdefault(s.task_id, []).append(s)
    tasks = {tid: aggregate_task(ss, k) for tid, ss in by_task.items()}
    n_tasks = len(tasks) or 1
    overall = {
        "tasks": len(tasks), "trials_per_task": k,
        "pass@1": round(sum(t["pass@1"] for t in tasks.values()) / n_tasks, 3),
        f"pass@{k}": round(sum(t[f"pass@{k}"] for t in tasks.values()) / n_tasks, 3),
        "solved": sum(1 for t in tasks.values() if t["passed"] > 0),
        "exit_status_counts": _counts(s.exit_status for s in scores),
        **{f"mean_{key}": round(statistics.fmean([s.soft.get(key, 0.0) for s in scores]), 2) if scores else 0.0
           for key in SOFT_KEYS},
    }
    return {"label": label, "suite": suite, "policy": policy, "k": k, "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
            "overall": overall, "tasks": tasks, "trials": [s.to_dict() for s in scores]}


def update_leaderboard(path: Path, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Insert or replace ``entry`` (by label) in the leaderboard JSON; returns all entries, best first."""
    entries = json.loads(path.read_text()) if path.is_file() else []
    entries = [e for e in entries if e.get("label") != entry["label"]] + [entry]
    entries.sort(key=lambda e: (-e["overall"]["pass@1"], e["overall"].get("mean_launches", 0),
                                e["overall"].get("mean_wall_s", 0)))
    path.write_text(json.dumps(entries, indent=2, default=str))
    return entries


def leaderboard_markdown(entries: list[dict[str, Any]]) -> str:
    lines = ["| rank | label | suite | tasks | pass@1 | pass@k (k) | solved | launches | steps | tool calls | tokens | wall s "
             "| exit statuses |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, e in enumerate(entries, 1):
        o, k = e["overall"], e["k"]
        lines.append(f"| {i} | {e['label']} | {e['suite']} | {o['tasks']} | {o['pass@1']:.2f} | {o[f'pass@{k}']:.2f} "
                     f"({k}) | {o['solved']}/{o['tasks']} | {o['mean_launches']} | {o['mean_policy_steps']} | "
                     f"{o['mean_tool_calls']} | {o['mean_tokens']} | {o['mean_wall_s']} | "
                     f"{exits_cell(o.get('exit_status_counts') or {})} |")
    return "\n".join(lines) + "\n"


def tasks_markdown(entry: dict[str, Any]) -> str:
    k = entry["k"]
    extra = [f"pass@{k}"] if k > 1 else []  # with one trial pass@k is pass@1
    head = ["task", "passed/trials", "pass@1", *extra, "exit status", "first failing gate", "failed checks",
            "launches", "steps", "wall s (±)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for tid, t in sorted(entry["tasks"].items()):
        failed = [n for n, rate in t["check_pass_rate"].items() if rate < 1.0]
        wall = t["soft"]["wall_s"]
        cells = [tid, f"{t['passed']}/{t['trials']}", f"{t['pass@1']:.2f}", *[f"{t[c]:.2f}" for c in extra],
                 exits_cell(t.get("exit_status_counts") or {}), t["first_failing_gate"] or "—", ", ".join(failed) or "—", str(t["soft"]["launches"]["mean"]),
                 str(t["soft"]["policy_steps"]["mean"]), f"{wall['mean']} (±{wall['std']})"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
