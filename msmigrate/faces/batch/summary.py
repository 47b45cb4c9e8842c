"""Batch summary: ``summary.json`` and a Markdown table (``summary.md``), one row per manifest item."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from msmigrate.faces.batch.state import ItemState

GATES = ("G0", "G1", "G2", "G3", "G4", "G5", "G6")


def summarize(items: list[ItemState]) -> dict[str, Any]:
    rows = []
    for st in items:
        res = st.result or {}
        c = res.get("counters") or {}
        rows.append({
            "id": st.id, "run_id": st.run_id, "status": st.status, "exit_status": st.exit_status,
            "exit_detail": st.exit_detail, "gates_passed": [g for g, ok in (res.get("gates") or {}).items() if ok],
            "launches": int(c.get("launches", 0)), "policy_steps": int(c.get("policy_steps", 0)),
            "tool_calls": int(c.get("tool_calls", 0)), "tokens": int(c.get("tokens", 0)),
            "wall_s": res.get("wall_s"), "report": res.get("report"), "attempt": st.attempt,
        })
    counts: dict[str, int] = {}
    for r in rows:
        counts[str(r["exit_status"])] = counts.get(str(r["exit_status"]), 0) + 1
    return {"items": rows, "counts": counts, "total": len(rows),
            "succeeded": sum(1 for r in rows if r["exit_status"] == "success")}


def markdown(summary: dict[str, Any]) -> str:
    lines = ["| item | run id | exit status | gates passed | launches | steps | tool calls | tokens | wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in summary["items"]:
        gates = "".join("✔" if g in r["gates_passed"] else "·" for g in GATES)
        lines.append(f"| {r['id']} | {r['run_id']} | {r['exit_status']} | {gates} | {r['launches']} | "
                     f"{r['policy_steps']} | {r['tool_calls']} | {r['tokens']} | {r['wall_s']} |")
    lines += ["", f"{summary['succeeded']}/{summary['total']} succeeded; "
              + ", ".join(f"{k}: {v}" for k, v in sorted(summary["counts"].items()))]
    return "\n".join(lines) + "\n"


def write_summary(batch_dir: Path, items: list[ItemState]) -> dict[str, Any]:
    summary = summarize(items)
    (batch_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    (batch_dir / "summary.md").write_text(markdown(summary))
    return summary
