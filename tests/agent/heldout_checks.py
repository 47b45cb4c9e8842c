"""Checks shared by the blind fault groups' tests (tests/agent/test_heldout3_faults.py, test_heldout4_faults.py):
a group is registered apart and well formed, the routing bench reports every group, and a runtime fault's
simulation is the cause of the condition it stands for."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from msmigrate.testbeds.faults import GROUPS, all_faults, fault_group, wrap_runtime

# the surfaces whose files are the run's own artifacts: where a fault's fix lies there, a full run must repair it
ARTIFACT_SURFACES = {"plugin", "mm_plugin", "template", "collator", "yaml", "launch"}


def assert_group_apart(group: str, faults: dict, prefix: str, size: int, per_owner_at_least: dict[str, int]) -> None:
    """``faults`` (id -> Fault) are the group ``group`` selects and nothing else, blind, spread over owners and
    surfaces, ``repair`` exactly on the run's own artifacts, and none repeats another group's edits or runtime."""
    everything = all_faults()
    assert {f.id for f in everything if fault_group(f) == group} == set(faults)
    assert group in GROUPS and not any(fault_group(f) == group for f in everything if f.id not in faults)
    assert all(i.startswith(prefix) and f.heldout for i, f in faults.items())
    per_owner = Counter(f.owner for f in faults.values())
    assert len(faults) >= size and all(per_owner[o] >= n for o, n in per_owner_at_least.items()), per_owner
    assert {f.surface for f in faults.values()} >= ARTIFACT_SURFACES | {"dataset", "runtime", "host"}
    # never repair on the records, the target's own data code, the runtime or the host
    assert all(f.repair == (f.surface in ARTIFACT_SURFACES) for f in faults.values())
    assert all((f.runtime is not None) == (f.owner == "environment") for f in faults.values())
    others = [f for f in everything if f.id not in faults]
    edits = {tuple(f.edits) for f in others if f.edits}
    assert not [i for i, f in faults.items() if f.edits and tuple(f.edits) in edits]
    runtimes = [f.runtime for f in others if f.runtime is not None]
    assert not [i for i, f in faults.items() if f.runtime is not None and f.runtime in runtimes]


def assert_bench_reports_every_group() -> None:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_fault_routing.py"
    spec = importlib.util.spec_from_file_location("bench_fault_routing_groups", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = [{"id": f.id, "owner": f.owner} for f in all_faults()]
    assert set(bench.grouped_totals(results)) == set(GROUPS)


def run_wrapped_and_plain(runtime, program: str, env: dict[str, str], folder: Path):
    """``program`` under the fault's wrapped runtime and under the plain interpreter, with the same variables."""
    python = wrap_runtime(runtime, sys.executable, folder / "rt", model_type="qwen2_vl")
    wrapped = subprocess.run([python, "-c", program], capture_output=True, text=True, timeout=180,
                             env={**os.environ, **env}, cwd=folder)
    plain = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=180,
                           env={**os.environ, **env}, cwd=folder)
    return wrapped, plain
