"""The open-world sweep: every model type of transformers' MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES, built as a
tiny offline source from the family's own classes and migrated with the rules policy onto a fresh stand-in target.

    python benchmarks/bench_open_world_sweep.py --runtime-python /path/to/venv/bin/python
    python benchmarks/bench_open_world_sweep.py --families llava,qwen2_vl --jobs 2 --out /tmp/sweep

Per family: ``python -m msmigrate.testbeds.open_world.build TYPE DIR/source`` in the runtime python (shrunk config,
the family's processor with its special tokens, a chat template, PIL sample data; then the processor and the model
are reloaded and a forward with labels must give a finite loss), ``msmigrate fixtures target DIR/target``, and
``msmigrate run`` with ``policy: rules`` and ``runtime_python`` set to the same runtime. One line per family:

    green            every gate passed with evidence
    declined         the run ended unsupported_by_policy (the reason follows)
    failed G<n>      the first gate that did not pass, and the run's exit detail
    not buildable    the builder's failing stage and reason
    timeout / error  the per-family limit ran out, or msmigrate printed no summary

then the totals. ``--table`` writes the lines as a markdown table (default benchmarks/open_world_sweep.md). The
runtime python matters: in transformers 5.x many processors need torchvision, and the runtime must have a torch and
torchvision of one build (a CUDA torchvision does not load next to a CPU torch); with none the builder uses the PIL
image processors where the family has them and reports the rest as not buildable.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TABLE = REPO / "benchmarks" / "open_world_sweep.md"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


@dataclass
class FamilyLine:
    family: str
    status: str  # green | declined | failed G<n> | not buildable | timeout | error | buildable (--build-only) | not run
    detail: str
    template: str = ""
    seconds: float = 0.0
    commit: str = ""  # the msmigrate commit the line was measured at ("" before sweeps recorded it)

    def text(self) -> str:
        return f"{self.family:<26} {self.status:<14} {self.commit or '?':<8} {self.detail}"


def all_families() -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    return list(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)


def model_name(family: str) -> str:
    """A valid spec model_name (lower-case letters, digits, '_', 2-40 chars) for ``family``."""
    return ("ow_" + re.sub(r"[^a-z0-9]+", "_", family.lower())).strip("_")[:40]


def _one_line(text: str, limit: int = 240) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def build_source(family: str, dest: Path, runtime_python: str, limit_s: float) -> tuple[dict | None, str]:
    cmd = [runtime_python, "-m", "msmigrate.testbeds.open_world.build", family, str(dest)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s, env=ENV, cwd=REPO)
    except subprocess.TimeoutExpired:
        return None, f"build ran past {limit_s:.0f} s"
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return None, "builder printed no result: " + _one_line(done.stderr[-600:])
    return json.loads(lines[-1]), ""


def first_failed_gate(evidence_path: Path, summary: dict) -> tuple[str, str]:
    """The gate the run ended on and its own summary: the last failed record of evidence.json's gate history
    (the gates table keeps only gates that passed), else the first gate the summary marks failed."""
    if evidence_path.is_file():
        ev = json.loads(evidence_path.read_text(encoding="utf-8"))
        history = ev.get("gate_history") or []
        # a gate that failed and never passed after: the lowest of those is where the run stopped (a later gate's
        # failure there is a consequence: G3 has no config to load when G1 kept the config phase from running)
        open_fail: dict[str, dict] = {}
        for record in history:
            if record.get("passed") is False:
                open_fail[record.get("gate", "—")] = record
            elif record.get("passed") is True:
                open_fail.pop(record.get("gate", "—"), None)
        if open_fail:
            gate = min(open_fail)
            return gate, open_fail[gate].get("summary") or ""
    gates = summary.get("gates") or {}
    marked = sorted(g for g, ok in gates.items() if ok is False)
    return (marked[0] if marked else "—"), ""


def gates_so_far(runs: Path) -> str:
    """How far a run that was stopped got: the gates its trajectory records as passed (last record per gate)."""
    last: dict[str, bool] = {}
    for path in sorted(runs.glob("*/trajectory.jsonl")):
        for ln in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(ln) if ln.startswith("{") else {}
            if record.get("kind") == "gate" and record.get("gate"):
                last[record["gate"]] = bool(record.get("passed"))
    passed = sorted(g for g, ok in last.items() if ok)
    failed = sorted(g for g, ok in last.items() if not ok)
    return ((f"; passed {', '.join(passed)}" if passed else "; no gate passed")
            + (f"; failed so far {', '.join(failed)}" if failed else ""))


def run_family(family: str, out: Path, runtime_python: str, limit_s: float, build_only: bool = False,
               probe_timeout_s: float = 0.0) -> FamilyLine:
    started = time.monotonic()
    work = out / family
    if work.exists():
        import shutil
        shutil.rmtree(work)
    work.mkdir(parents=True)
    built, why = build_source(family, work / "source", runtime_python, min(limit_s, 600))
    if built is None:
        return FamilyLine(family, "not buildable", why, seconds=time.monotonic() - started)
    (work / "build.json").write_text(json.dumps(built, indent=1), encoding="utf-8")
    template = built.get("template_source", "")
    if not built["ok"]:
        return FamilyLine(family, "not buildable", f"{built['stage']}: {_one_line(built['reason'])}", template,
                          time.monotonic() - started)
    if build_only:
        return FamilyLine(family, "buildable", f"not migrated (--build-only); loss {built.get('loss'):.3f}", template,
                          time.monotonic() - started)
    msm = [sys.executable, "-m", "msmigrate.faces.cli"]
    subprocess.run([*msm, "fixtures", "target", str(work / "target")], check=True, capture_output=True,
                   env=ENV, cwd=REPO)
    spec = {"source": str(work / "source"), "target": str(work / "target"), "model_name": model_name(family),
            "runtime_python": runtime_python, "policy": "rules",
            "budgets": {"wall_seconds": float(limit_s)}}
    if probe_timeout_s:  # a loaded host: G4's training parity alone ran past the default on 2 shared cores
        spec["launch"] = {"probe_timeout_s": float(probe_timeout_s)}
    (work / "spec.yaml").write_text(json.dumps(spec, indent=1), encoding="utf-8")  # JSON is YAML
    remaining = max(60.0, limit_s - (time.monotonic() - started))
    try:
        done = subprocess.run([*msm, "run", str(work / "spec.yaml"), "--policy", "rules", "--runs-dir",
                               str(work / "runs")], capture_output=True, text=True, timeout=remaining + 120,
                              env=ENV, cwd=REPO)
    except subprocess.TimeoutExpired:
        return FamilyLine(family, "timeout", f"msmigrate run ran past {remaining + 120:.0f} s"
                          + gates_so_far(work / "runs"), template, time.monotonic() - started)
    (work / "run.stderr").write_text(done.stderr, encoding="utf-8")
    try:
        summary = json.loads(done.stdout[done.stdout.index("{"):])
    except ValueError:
        return FamilyLine(family, "error", f"rc {done.returncode}, no summary: {_one_line(done.stderr[-400:])}",
                          template, time.monotonic() - started)
    status, detail = summary.get("exit_status"), _one_line(summary.get("exit_detail") or "")
    seconds = time.monotonic() - started
    if status == "success":
        return FamilyLine(family, "green", "all gates passed with evidence", template, seconds)
    if status == "unsupported_by_policy":
        return FamilyLine(family, "declined", detail, template, seconds)
    report = Path(summary.get("report") or work)
    gate, cause = first_failed_gate(report.parent / "evidence.json", summary)
    return FamilyLine(family, f"failed {gate}", f"[{status}] {_one_line(cause or detail)}", template, seconds)


def totals(lines: list[FamilyLine]) -> list[str]:
    """The counts and the issue's two ratios (green; green or honestly declined) over the buildable families. Where
    some buildable families were not migrated, the ratios are given both over all buildable ones (an unmigrated
    family counts as neither) and over the migrated ones, with how many those are."""
    count = lambda pred: sum(1 for ln in lines if pred(ln.status))  # noqa: E731
    green, declined = count(lambda s: s == "green"), count(lambda s: s == "declined")
    failed = count(lambda s: s.startswith("failed") or s in ("timeout", "error"))
    unbuildable = count(lambda s: s == "not buildable")
    unrun = count(lambda s: s == "buildable")
    unreached = count(lambda s: s == "not run")
    migrated = len(lines) - unbuildable - unrun - unreached
    buildable = migrated + unrun + unreached

    def pct(n: int, of: int) -> str:
        return f"{100.0 * n / of:.0f} %" if of else "—"

    head = (f"families {len(lines)}: buildable {buildable}, not buildable {unbuildable}"
            + (f", built but not migrated {unrun}" if unrun else "")
            + (f", not reached {unreached}" if unreached else ""))
    if migrated == buildable:
        return [head, f"green {green} ({pct(green, migrated)} of buildable), declined {declined}, "
                      f"green or declined {green + declined} ({pct(green + declined, migrated)}), failed {failed}"]
    return [head + f"; migrated {migrated} of the {buildable} buildable",
            f"green {green} ({pct(green, buildable)} of buildable, {pct(green, migrated)} of migrated), "
            f"declined {declined}, green or declined {green + declined} ({pct(green + declined, buildable)} of "
            f"buildable, {pct(green + declined, migrated)} of migrated), failed {failed}"]


def table_markdown(lines: list[FamilyLine], header: str) -> str:
    rows = ["| family | result | detail | chat template | seconds | commit |", "|---|---|---|---|---|---|"]
    for ln in lines:
        detail = ln.detail.replace("|", "\\|")
        rows.append(f"| `{ln.family}` | {ln.status} | {detail} | {ln.template or '—'} | {ln.seconds:.0f} "
                    f"| {ln.commit or '?'} |")
    return "\n".join([header, "", *rows, "", *[f"- {t}" for t in totals(lines)], ""])


def code_commit() -> str:
    """The commit of the msmigrate code this sweep runs (``+dirty`` with uncommitted changes): a line measured on
    older code says so when sweeps are merged."""
    from msmigrate.core.git import git

    head = git(REPO, "rev-parse", "--short=7", "HEAD", check=False)
    dirty = git(REPO, "status", "--porcelain", "--", "msmigrate", check=False)
    return (head.stdout.strip() or "unknown") + ("+dirty" if dirty.stdout.strip() else "")


def runtime_versions(python: str) -> str:
    """torch / transformers / torchvision as the runtime python imports them (torchvision: why not, if not)."""
    probe = subprocess.run([python, "-c", "import torch, transformers; v = [torch.__version__, "
                            "transformers.__version__]\ntry:\n import torchvision; v.append(torchvision.__version__)"
                            "\nexcept Exception as e: v.append('none(' + type(e).__name__ + ')')\nprint(*v)"],
                           capture_output=True, text=True, env=ENV)
    torch_v, tf_v, tv_v = (probe.stdout.split() + ["?", "?", "?"])[:3]
    return f"torch {torch_v}, transformers {tf_v}, torchvision {tv_v}"


def make_runtime(dest: Path, torch_req: str, torchvision_req: str) -> str:
    """A user's runtime with torchvision: a venv holding ``torch_req`` and ``torchvision_req`` (one build: pip
    resolves the torch a torchvision wheel pins) that sees this project's venv for everything else. Returns its
    python."""
    python = dest / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(dest)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", torch_req, torchvision_req], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ours = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # appended after the runtime's own site-packages: its torch / torchvision win, the rest comes from ours
    Path(site, "zz_chain_project_venv.pth").write_text(f"import site; site.addsitedir({ours!r})\n",
                                                       encoding="utf-8")
    return str(python)


def _header(runtime: str) -> str:
    return (f"# Open-world sweep\n\nRules policy, stand-in target, one trial per family; runtime {runtime}. "
            "Written by `benchmarks/bench_open_world_sweep.py`; a family's work folder keeps its source, "
            "build.json, spec, run folder and the run's stderr.")


def merge_records(paths: list[Path]) -> list[dict]:
    """One record per family from several sweeps' lines.jsonl files: the newest line wins (by its ``finished``
    time; lines without one, from sweeps before it was recorded, count as older than any with one, in the order the
    files and lines are given), except that a build-only line never replaces a migration's result (it does replace
    an older "not buildable": the builder has since learnt to build that family)."""
    order: list[tuple[str, int, int, dict]] = []
    for f, path in enumerate(paths):
        for i, ln in enumerate(path.read_text(encoding="utf-8").splitlines()):
            if ln.strip():
                record = json.loads(ln)
                order.append((record.get("finished", ""), f, i, record))
    by_family: dict[str, dict] = {}
    for *_, record in sorted(order, key=lambda t: t[:3]):
        family = record["family"]
        if record["status"] == "buildable" and family in by_family \
                and by_family[family]["status"] not in ("buildable", "not buildable"):
            continue
        by_family[family] = record
    return list(by_family.values())


def _replay(paths: list[Path], table: str, runtime_python: str, expected: list[str]) -> list[FamilyLine]:
    """Finished (or interrupted) sweeps' lines again, with totals: a long sweep recorded after the fact, or pieced
    together from several (``merge_records``: a family's newest line wins; each row names the commit it was measured
    at, ``?`` for lines from before commits were recorded)."""
    records = merge_records(paths)
    seen = {r["family"] for r in records}
    for family in expected:  # asked for but in no file: the sweep did not get to it
        if family not in seen:
            records.append({"family": family, "status": "not run", "detail": "not reached by this sweep"})
    rank = {f: i for i, f in enumerate(expected or all_families())}
    records.sort(key=lambda r: rank.get(r["family"], len(rank)))
    head = code_commit()
    runtime = (records[0].get("runtime", "") if records else "") or runtime_versions(runtime_python)
    lines = [FamilyLine(**{k: v for k, v in r.items() if k in FamilyLine.__dataclass_fields__}) for r in records]
    print(f"{len(lines)} families from {', '.join(map(str, paths))}; runtime {runtime}; checkout at {head}")
    for line in lines:
        print(line.text())
    for text in totals(lines):
        print(text)
    if table:
        Path(table).write_text(table_markdown(lines, _header(runtime)), encoding="utf-8")
    return lines


def main(argv: list[str] | None = None) -> list[FamilyLine]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", default="", help="comma-separated model types (default: all, mapping order; "
                    "with --from-lines: the families the sweep was asked for, absent ones listed as not run)")
    ap.add_argument("--jobs", type=int, default=1, help="families migrated at once")
    ap.add_argument("--out", default="", help="work folder (default: a temporary one, kept)")
    ap.add_argument("--limit-s", type=float, default=1200.0, help="seconds per family (build + run)")
    ap.add_argument("--runtime-python", default=os.environ.get("MSMIGRATE_SWEEP_RUNTIME_PYTHON", sys.executable),
                    help="the python the sources are built and the gates run in (env MSMIGRATE_SWEEP_RUNTIME_PYTHON)")
    ap.add_argument("--table", default=str(TABLE), help="markdown table of the lines ('' for none)")
    ap.add_argument("--make-runtime", default="", help="create (or update) a venv with torch + torchvision here and "
                    "use it as the runtime python")
    ap.add_argument("--runtime-torch", default="torch==2.14.1", help="with --make-runtime: the torch requirement")
    ap.add_argument("--runtime-torchvision", default="torchvision==0.29.1",
                    help="with --make-runtime: the torchvision requirement (the release built for that torch)")
    ap.add_argument("--probe-timeout-s", type=float, default=0.0, help="the specs' launch.probe_timeout_s (default: "
                    "the product's); raise it on a loaded host, where G4's training parity probe outlasts it")
    ap.add_argument("--build-only", action="store_true", help="build and verify the sources, migrate nothing")
    ap.add_argument("--from-lines", default="", help="print and tabulate finished sweeps' lines.jsonl files "
                    "(comma-separated; a family's newest line wins, a build-only line never replaces a migration; "
                    "each row names the commit it was measured at), run nothing")
    args = ap.parse_args(argv)
    if args.make_runtime:
        args.runtime_python = make_runtime(Path(args.make_runtime), args.runtime_torch, args.runtime_torchvision)
    if args.from_lines:
        return _replay([Path(p) for p in args.from_lines.split(",") if p], args.table, args.runtime_python,
                       [f for f in args.families.split(",") if f])
    families = [f for f in args.families.split(",") if f] or all_families()
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="msmigrate-sweep-"))
    out.mkdir(parents=True, exist_ok=True)
    runtime = runtime_versions(args.runtime_python)
    commit = code_commit()
    print(f"runtime {args.runtime_python}: {runtime}; msmigrate at {commit}")
    print(f"{len(families)} families, jobs {args.jobs}, limit {args.limit_s:.0f} s each, work in {out}")
    lines: list[FamilyLine] = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_family, f, out, args.runtime_python, args.limit_s, args.build_only,
                               args.probe_timeout_s)
                   for f in families]
        for fut in futures:
            line = fut.result()
            line.commit = commit
            lines.append(line)
            print(line.text(), flush=True)
            with (out / "lines.jsonl").open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({**vars(line), "runtime": runtime,
                                     "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")
    for text in totals(lines):
        print(text)
    if args.table:
        Path(args.table).write_text(table_markdown(lines, _header(runtime)), encoding="utf-8")
    return lines


if __name__ == "__main__":
    from results_md import recorded

    with recorded("bench_open_world_sweep"):
        main()
