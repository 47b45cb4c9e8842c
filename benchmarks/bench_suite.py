"""Where the test suite's time goes: wall and CPU seconds per test, so a shared machine's load does not mislead.

As a pytest plugin it appends one JSON line per test as the test ends (a run stopped half-way still leaves its
figures); as a script it prints the totals and the tests and files costing the most CPU:

    PYTHONPATH=benchmarks MSMIGRATE_SUITE_PROFILE=/tmp/suite.jsonl \\
        python -m pytest -q -m "not realmm and not long" -p bench_suite --durations=60
    python benchmarks/bench_suite.py /tmp/suite.jsonl --top 30

CPU is this process's plus its reaped children's (``getrusage``), setup + call + teardown. Work done by a process
pytest did not start and wait for is not in it: probes forked from the warm target runtime run under its server, so
their CPU shows up only in wall time. ``load1`` is the machine's 1-minute load average when the test started; wall
figures taken at a load above the core count are stretched by other people's work, CPU figures much less.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import time
from pathlib import Path

OUT_ENV = "MSMIGRATE_SUITE_PROFILE"
_rows: dict[str, dict] = {}


def _cpu() -> tuple[float, float]:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _measure(item, phase: str):
    wall0, (self0, kids0) = time.perf_counter(), _cpu()
    yield
    wall1, (self1, kids1) = time.perf_counter(), _cpu()
    row = _rows.setdefault(item.nodeid, {"test": item.nodeid, "wall": 0.0, "self": 0.0, "child": 0.0,
                                         "load1": round(os.getloadavg()[0], 2)})
    row["wall"] += wall1 - wall0
    row["self"] += self1 - self0
    row["child"] += kids1 - kids0
    row[phase] = round(wall1 - wall0, 3)
    if phase == "teardown":
        with open(os.environ.get(OUT_ENV, "suite_profile.jsonl"), "a") as f:
            f.write(json.dumps(_rows.pop(item.nodeid)) + "\n")


try:  # the plugin half needs pytest; the report half does not
    import pytest
except ImportError:  # pragma: no cover
    pytest = None

if pytest is not None:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(item):
        yield from _measure(item, "setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item):
        yield from _measure(item, "call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(item):
        yield from _measure(item, "teardown")


def report(path: Path, top: int) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    cpu = {r["test"]: r["self"] + r["child"] for r in rows}
    loads = sorted(r["load1"] for r in rows)
    print(f"{len(rows)} tests: wall {sum(r['wall'] for r in rows):.0f} s, CPU {sum(cpu.values()):.0f} s "
          f"(pytest {sum(r['self'] for r in rows):.0f} s, its children {sum(r['child'] for r in rows):.0f} s); "
          f"load1 median {loads[len(loads) // 2] if loads else 0:.1f}")
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for r in rows:
        f = files[r["test"].split("::")[0]]
        f[0] += 1
        f[1] += r["wall"]
        f[2] += cpu[r["test"]]
    print(f"\nfiles by CPU (top {top}):\n    CPU s   wall s  tests  file")
    for name, (n, wall, c) in sorted(files.items(), key=lambda kv: -kv[1][2])[:top]:
        print(f"{c:9.1f} {wall:8.1f} {n:6d}  {name}")
    print(f"\ntests by CPU (top {top}):\n    CPU s   wall s  setup s  test")
    for r in sorted(rows, key=lambda r: -cpu[r["test"]])[:top]:
        print(f"{cpu[r['test']]:9.1f} {r['wall']:8.1f} {r.get('setup', 0.0):8.1f}  {r['test']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile", type=Path, help="the JSON-lines file the plugin wrote")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    report(args.profile, args.top)


if __name__ == "__main__":
    from results_md import recorded

    with recorded("bench_suite"):
        main()
