"""What the phase prompts show as "Gate results so far": the latest run of each gate, numbered, and whether it is
still the current proof.

Why not ``state["gates"]`` alone: re-entering a phase after a failure drops the records of that phase and every later
one (``gates_before``), so the failure being repaired vanished from the block while the hand-off still quoted the
gates an earlier pass proved; a live player read the block as the current state and missed that G4 had failed. The
history keeps every run: each gate shows its latest run, how many times it ran, and — for a record the re-entry made
stale — that it is no longer the current proof (the gate runs again when its phase comes round).
"""

from __future__ import annotations

from typing import Any

from msmigrate.agent.state import PHASE_GATES

GATE_ORDER = [g for gates in PHASE_GATES.values() for g in gates]


def latest_gate_results(gates: dict[str, Any], history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per gate that ever ran, in gate order: its latest run's verdict and summary, ``attempt`` (which run
    of this gate that was) and ``current`` (False when an earlier phase was re-entered since: the proof no longer
    stands, and a failure there is the one the re-entered phase repairs)."""
    runs: dict[str, int] = {}
    latest: dict[str, dict[str, Any]] = {}
    for record in history or []:
        name = record.get("gate")
        if not name:
            continue
        runs[name] = runs.get(name, 0) + 1
        latest[name] = record
    for name, record in (gates or {}).items():  # a state without history (an old checkpoint): what it has
        if name not in latest:
            runs[name], latest[name] = 1, record
    order = {g: i for i, g in enumerate(GATE_ORDER)}
    rows = []
    for name in sorted(latest, key=lambda g: (order.get(g, len(order)), g)):
        record = latest[name]
        rows.append({"gate": name, "passed": bool(record.get("passed")), "summary": record.get("summary", ""),
                     "attempt": runs[name], "current": name in (gates or {})})
    return rows
