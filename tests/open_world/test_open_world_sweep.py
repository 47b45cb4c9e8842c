"""benchmarks/bench_open_world_sweep.py: the line per family, the totals and the table, and a fast subset of the real
sweep (a family that migrates green, one with nothing faithful to build) through the real builder and `msmigrate run`
with the rules policy on a fresh stand-in target."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "bench_open_world_sweep.py"
LINE = re.compile(r"^(?P<family>\S+)\s+(?P<status>green|declined|failed G\d|failed —|not buildable|timeout|error)"
                  r"\s+(?P<detail>\S.*)$")


def _bench():
    spec = importlib.util.spec_from_file_location("bench_open_world_sweep", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _no_processor_family() -> str:
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

    return next(m for m in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES if not PROCESSOR_MAPPING_NAMES.get(m))


def test_lines_totals_and_table_from_a_recorded_sweep(tmp_path, capsys):
    bench = _bench()
    records = [
        {"family": "a", "status": "green", "detail": "all gates passed with evidence", "template": "t", "seconds": 9},
        {"family": "b", "status": "declined", "detail": "encoder-decoder", "template": "t", "seconds": 3},
        {"family": "c", "status": "failed G2", "detail": "[gates_failed] data parity | x", "template": "", "seconds": 5},
        {"family": "d", "status": "not buildable", "detail": "classes: no processor", "template": "", "seconds": 1},
    ]
    lines_file = tmp_path / "lines.jsonl"
    lines_file.write_text("".join(json.dumps({**r, "runtime": "torch X"}) + "\n" for r in records))
    table = tmp_path / "table.md"
    bench.main(["--from-lines", str(lines_file), "--table", str(table)])
    out = capsys.readouterr().out.splitlines()
    family_lines = [ln for ln in out if LINE.match(ln)]
    assert [LINE.match(ln)["family"] for ln in family_lines] == ["a", "b", "c", "d"]
    assert "families 4: buildable 3, not buildable 1" in out
    assert "green 1 (33 % of buildable), declined 1, green or declined 2 (67 %), failed 1" in out
    md = table.read_text()
    assert "| `c` | failed G2 | [gates_failed] data parity \\| x |" in md and "runtime torch X" in md


def test_sweeps_merge_newest_line_per_family_with_its_commit(tmp_path, capsys):
    """Passes over different families (and re-runs after a fix) make one table: a family's newest line wins
    whatever the file order, a build-only line never replaces a migration (but does replace an older "not
    buildable": the builder learnt that family since), and each row names its commit."""
    bench = _bench()

    def write(name, records):
        path = tmp_path / name
        path.write_text("".join(json.dumps({"detail": "d", "template": "", "seconds": 1, **r}) + "\n"
                                for r in records))
        return path

    newer = write("rerun.jsonl", [{"family": "z", "status": "green", "finished": "2026-12-06T18:00:00Z",
                                   "commit": "def5678"}])
    old = write("old.jsonl", [{"family": "x", "status": "failed G2"}, {"family": "y", "status": "buildable"},
                              {"family": "w", "status": "buildable"}, {"family": "v", "status": "not buildable"}])
    mid = write("mid.jsonl", [
        {"family": "x", "status": "buildable", "finished": "2026-12-06T17:30:00Z", "commit": "abc1234"},
        {"family": "y", "status": "green", "finished": "2026-12-06T17:00:00Z", "commit": "abc1234"},
        {"family": "z", "status": "failed G4", "finished": "2026-12-06T17:00:00Z", "commit": "abc1234"},
        {"family": "v", "status": "buildable", "finished": "2026-12-06T17:00:00Z", "commit": "abc1234"}])
    table = tmp_path / "table.md"
    lines = bench.main(["--from-lines", f"{newer},{old},{mid}", "--table", str(table)])
    got = {ln.family: (ln.status, ln.commit) for ln in lines}
    assert got == {"x": ("failed G2", ""), "y": ("green", "abc1234"), "z": ("green", "def5678"),
                   "w": ("buildable", ""), "v": ("buildable", "abc1234")}
    md = table.read_text()
    assert "| `z` | green | d |  | 1 | def5678 |" in md.replace("—", "") and "| `x` | failed G2 | d |" in md
    out = capsys.readouterr().out  # the ratios over every buildable family, and over the migrated ones
    assert "buildable 5, not buildable 0, built but not migrated 2; migrated 3 of the 5 buildable" in out
    assert "green 2 (40 % of buildable, 67 % of migrated), declined 0, green or declined 2 (40 % of buildable, " \
           "67 % of migrated), failed 1" in out


def test_model_name_is_a_valid_spec_name():
    bench = _bench()
    assert bench.model_name("blip-2") == "ow_blip_2"
    assert bench.model_name("kosmos-2.5") == "ow_kosmos_2_5"
    assert re.fullmatch(r"[a-z0-9_]{2,40}", bench.model_name("x" * 80))


@pytest.mark.integration
def test_fast_subset_sweeps_a_green_family_and_an_unbuildable_one(tmp_path):
    """llava builds with its PIL image processor (no torchvision needed) and migrates green; a model type with no
    processor class is listed as not buildable with the reason. About 5 minutes on 2 idle cores (the green run's
    G4-G6 torchrun launches); the limits leave room for a loaded machine."""
    missing = _no_processor_family()
    env = {**os.environ, "MSMIGRATE_RESULTS_MD": "0"}
    done = subprocess.run([sys.executable, str(BENCH), "--families", f"llava,{missing}", "--out", str(tmp_path / "w"),
                           "--table", str(tmp_path / "t.md"), "--limit-s", "2400",
                           "--runtime-python", sys.executable],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=3000)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = {m["family"]: m for m in map(LINE.match, done.stdout.splitlines()) if m}
    assert set(lines) == {"llava", missing}, done.stdout
    stderr = tmp_path / "w" / "llava" / "run.stderr"
    assert lines["llava"]["status"] == "green", (lines["llava"].group(0),
                                                stderr.read_text()[-3000:] if stderr.is_file() else "")
    assert lines[missing]["status"] == "not buildable"
    assert "no processor class" in lines[missing]["detail"]
    assert "families 2: buildable 1, not buildable 1" in done.stdout
    assert "| `llava` | green |" in (tmp_path / "t.md").read_text()
    evidence = next((tmp_path / "w" / "llava" / "runs").glob("*/evidence.json"))
    assert json.loads(evidence.read_text())["exit_status"] == "success"


def test_the_failed_gate_is_the_lowest_one_that_never_passed_after(tmp_path):
    # got_ocr2 in the sweep: G1 failed, so no config was written and G3 failed too; the line said "failed G3"
    bench = _bench()
    history = [{"gate": "G0", "passed": True}, {"gate": "G1", "passed": False, "summary": "no meta build"},
               {"gate": "G3", "passed": False, "summary": "config missing"}, {"gate": "G2", "passed": False},
               {"gate": "G2", "passed": True}, {"gate": "G1", "passed": False, "summary": "no meta build"},
               {"gate": "G3", "passed": False, "summary": "config missing"}]
    (tmp_path / "evidence.json").write_text(json.dumps({"gate_history": history}))
    assert bench.first_failed_gate(tmp_path / "evidence.json", {}) == ("G1", "no meta build")


def test_a_stopped_run_says_which_gates_it_had_passed(tmp_path):
    bench = _bench()
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    gates = [("G0", True), ("G1", True), ("G2", False), ("G2", True), ("G3", False)]
    run.joinpath("trajectory.jsonl").write_text("".join(
        json.dumps({"kind": "gate", "gate": g, "passed": ok}) + "\n" for g, ok in gates)
        + json.dumps({"kind": "decision"}) + "\n")
    assert bench.gates_so_far(tmp_path / "runs") == "; passed G0, G1, G2; failed so far G3"
    assert bench.gates_so_far(tmp_path / "none") == "; no gate passed"
