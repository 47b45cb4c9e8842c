"""Failure routing judged inside runs: one green migration, one injected fault per copy, the gates, the verdict.

    python benchmarks/bench_fault_routing.py                         # every fault (msmigrate/testbeds/faults)
    python benchmarks/bench_fault_routing.py --only config-micro-batch-zero,data-records-empty
    python benchmarks/bench_fault_routing.py --repair                # + the repair subset: a full rules run
    python benchmarks/bench_fault_routing.py --repair-at-write --only ...  # YAML faults put in the drafted YAML
    python benchmarks/bench_fault_routing.py --target real --only ...  # on the real MindSpeed-MM (real runtime)

The green migration is built once (the demo: rules policy, a bundled fixture, a fresh stand-in target; with
``--target real``, the same rules run into a copy of the real MindSpeed-MM checkout with its real runtime, the source
written by that runtime) and kept under ``--workdir`` for later invocations. A fault whose anchor is not in the
target (a stand-in data-path edit on the real checkout) is reported as not applied, never scored. Each fault gets a copy of the target and the source, its edits are
committed in the copy (a run branches from the checkout's HEAD), and the gates run on it as ``msmigrate verify``
runs them (no policy, inputs bound to the spec's source), stopping at the first classification: that is where
verify sends the failure. Scored per fault, from the run's trajectory and gate records:

- routed right: the phase the classify node sent the failure to is the true owner's phase (environment → config,
  where the launch settings live: ``OWNER_TO_PHASE``);
- owner named / abstained / confidently wrong: what the classification said (an LLM answer counts as named);
  confidently wrong is a wrong owner named at a confidence >= the classifier's decisive level;
- fix named: the report's row of the failed gate or its last-failure line (the diagnosis, as the report cuts it)
  names a file or key the fix changes (``Fault.fix``);
- fix in the diagnosis: the whole diagnosis the classify node hands the owner phase (an LLM policy's prompt shows
  it uncut) names a file or key the fix changes;
- missed: no gate failed at all;
- stopped: G0 stopped the run before any gate failure was classified; ``stopped_owner_right`` counts the stops whose
  G0 owner (the records: data; the runtime or host: environment) is the true owner — apart from routed right, since
  no phase runs;
- repaired (``--repair`` / ``--repair-only``; the faults in what the rules policy writes itself, ``rules_owned``:
  plugin, YAML, launch script, and the reused template / mm_plugin it re-derives when G2 refutes them): a full ``rules`` run on a faulted copy ends green; ``how`` says whether a gate failed
  on the way (the rules phases derive their artifacts afresh on a first visit, so a fault in the copy is often
  rewritten before any gate sees it). ``--repair-at-write``: the YAML faults put into the YAML the config phase
  drafts (``at_write``), so a green end is a repair after the gate failure the fault causes.

Results go to ``--out`` (JSON) and a table on stdout. Wall time: about 20-60 s per fault on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
import tempfile
from typing import Any, Callable

from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.input_checks import InputError
from msmigrate.agent.nodes.classify import OWNER_TO_PHASE
from msmigrate.agent.policies.rules import RulesPolicy
from msmigrate.agent.runner import Run, new_run_id
from msmigrate.core.git import git_out
from msmigrate.knowledge.classifier import DECISIVE_CONFIDENCE
from msmigrate.testbeds.faults import (GROUPS, Fault, FaultError, Layout, all_faults, apply, fault_group,
                                       wrap_runtime)
from msmigrate.tools import yaml_roundtrip as rt

GREEN_MARK = "green.json"


def git(cwd: Path, *args: str) -> str:
    return git_out(cwd, *args)  # the one git helper: scrubbed environment, no hooks (the target is a copy we made)


def build_green(workdir: Path, model: str, real: dict[str, str] | None = None) -> dict[str, Any]:
    """The green migration, once: the demo's run (``real``: a rules run into a copy of the real checkout, with its
    runtime), its work branch then checked out in the target itself."""
    mark = workdir / GREEN_MARK
    if mark.is_file():
        return json.loads(mark.read_text())
    if real is None:
        from msmigrate.faces.demo import run_demo

        state = run_demo(model, workdir)
    else:
        state = run_real(model, workdir, Path(real["checkout"]), real["runtime_python"])
    if state.get("exit_status") != "success":
        raise SystemExit(f"the green migration did not end green: {state.get('exit_status')} "
                         f"{state.get('exit_detail')}")
    target = workdir / "target"
    run_id = state["run_id"]
    git(target, "reset", "--hard", f"msmigrate/{run_id}")
    added = git(target, "diff", "--name-only", f"msmigrate/{run_id}/base", "HEAD").split()
    plugin_files = [p for p in added if p.endswith(".py") and "/models/" in p]
    green = {"model": model, "run_id": run_id, "target": str(target), "source": str(workdir / "sources" / model),
             "plugin": str(Path(plugin_files[0]).parent),
             "modeling": next(p for p in plugin_files if not p.endswith("__init__.py")),
             "config": next(p for p in added if p.endswith(".yaml")),
             "launch": next(p for p in added if p.endswith(".sh")),
             "runtime_python": real["runtime_python"] if real else None}
    mark.write_text(json.dumps(green, indent=1))
    return green


def run_real(model: str, workdir: Path, checkout: Path, runtime_python: str) -> dict[str, Any]:
    """The rules migration into a copy of the real MindSpeed-MM checkout (its git history kept), the source built
    by the real runtime's transformers: what tests/realmm/test_migrate_real.py runs, in-process."""
    from msmigrate.testbeds.fixtures.in_runtime import build_source_in_runtime

    workdir.mkdir(parents=True, exist_ok=True)
    target = workdir / "target"
    if not target.exists():
        shutil.copytree(checkout, target, symlinks=True)
    source = workdir / "sources" / model
    if not (source / "config.json").is_file():
        build_source_in_runtime(model, source, runtime_python)
    spec = RunSpec(source=source, target=target, model_name=model, policy="rules", runtime_python=runtime_python)
    with Run(spec, new_run_id(model), Settings(runs_dir=workdir.resolve() / "runs")) as run:
        return run.drive()


def real_paths(checkout: Path | None, runtime: str | None) -> dict[str, str]:
    """The real checkout and runtime: given, or where scripts/real_target.sh caches them."""
    cache = Path.home() / ".cache" / "msmigrate"
    found = {"checkout": str(checkout or cache / "real-target" / "MindSpeed-MM"),
             "runtime_python": runtime or str(cache / "real-runtime" / "bin" / "python")}
    if not (Path(found["checkout"]) / ".git").exists() or not Path(found["runtime_python"]).exists():
        raise SystemExit(f"no real checkout / runtime at {found} (build them with scripts/real_target.sh, or give "
                         f"--real-checkout and --real-runtime)")
    return found


def copy_for(green: dict[str, Any], fault: Fault, folder: Path) -> Layout:
    if folder.exists():
        shutil.rmtree(folder)
    target, source = folder / "target", folder / "source"
    shutil.copytree(green["target"], target, symlinks=True)
    shutil.copytree(green["source"], source, symlinks=True)
    git(target, "worktree", "prune")
    return Layout(root=target, plugin=green["plugin"], modeling=green["modeling"], config=green["config"],
                  launch=green["launch"], data=source / "data" / "train.json")


def fix_names(fault: Fault, layout: Layout) -> list[str]:
    """The fault's fix, placeholders resolved to what a report would print (file names, the plugin's path)."""
    names = {"modeling": Path(layout.modeling).name, "plugin": layout.plugin, "config": Path(layout.config).name,
             "launch": Path(layout.launch).name}
    return [f.format(**names) for f in fault.fix]


def faulted_spec(green: dict[str, Any], fault: Fault, layout: Layout, folder: Path, policy: str) -> RunSpec:
    model_type = json.loads((layout.data.parent.parent / "config.json").read_text()).get("model_type", "")
    base = green.get("runtime_python")  # the real runtime; the stand-in runs in this interpreter
    runtime = wrap_runtime(fault.runtime, base or sys.executable, folder / "runtime", model_type) \
        if fault.runtime else base
    spec = RunSpec(source=layout.data.parent.parent, target=layout.root, model_name=green["model"], policy=policy,
                   runtime_python=runtime, bind_inputs=True if policy == "none" else None)
    if policy == "none":  # as `msmigrate verify`, stopping at the first classification (where verify routes it)
        spec = spec.model_copy(update={"budgets": spec.budgets.model_copy(update={"phase_attempts": 0})})
    return spec


# The artifacts the rules policy writes itself in a transformers-native migration: the plugin, the YAML and the
# launch script; and the data path's template / mm_plugin, which its data phase reuses on branch A and derives anew
# from the source's facts when G2 refutes the reused ones (agent/routes/fsdp2/rules/data_rederive.py). The records,
# the runtime and the framework's shared collator code are the user's / the framework's.
RULES_WRITES = ("plugin", "yaml", "launch", "mm_plugin", "template")


def rules_owned(fault: Fault) -> bool:
    """In the repair subset: a fault whose fix is in an artifact the rules policy writes (or one marked ``repair``)."""
    return fault.repair or fault.surface in RULES_WRITES


def score_stopped(fault: Fault, layout: Layout, state: dict[str, Any]) -> dict[str, Any]:
    """A run that classified no gate failure: missed (all green), or stopped before routing (its inputs refused),
    the fix named when its one line names it."""
    detail = str(state.get("exit_detail") or "")
    # G0's owner of what stopped it (the records: data; the runtime or host: environment; None for a spec input):
    # no phase runs, the exit line sends the user there — counted apart from the routed, never as routed
    g0_owner = ((state.get("gates") or {}).get("G0") or {}).get("owner")
    return {"id": fault.id, "owner": fault.owner, "surface": fault.surface, "exit_status": state.get("exit_status"),
            "missed": state.get("exit_status") == "success", "routed": None, "named": None, "gate": None,
            "detail": detail[:300], "stopped": state.get("exit_status") != "success", "stop_owner": g0_owner,
            "fix_named": any(w in detail for w in fix_names(fault, layout))}


def score(fault: Fault, layout: Layout, state: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    records = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines() if line.strip()]
    first = next((r for r in records if r.get("kind") == "classify"), None)
    out: dict[str, Any] = {"id": fault.id, "owner": fault.owner, "surface": fault.surface,
                           "exit_status": state.get("exit_status")}
    if first is None:  # no gate failure classified: missed (all green), or the run stopped before routing it
        return {**out, **score_stopped(fault, layout, state)}
    failed = next((r for r in reversed(records) if r.get("kind") == "gate" and r.get("gate") == first.get("gate")
                   and not r.get("passed")), {})
    said = report_failure_lines(run_dir / "verification_report.md", first.get("gate", ""))
    wanted = fix_names(fault, layout)
    named = first.get("owner")
    out.update(missed=False, gate=first.get("gate"), route=first.get("route"), named=named,
               method=first.get("method"), case_id=first.get("case_id"), confidence=first.get("confidence"),
               routed=first.get("route") == OWNER_TO_PHASE[fault.owner],
               owner_named=named == fault.owner, abstained=named is None,
               confidently_wrong=bool(named) and named != fault.owner and
               float(first.get("confidence") or 0) >= DECISIVE_CONFIDENCE,
               wrong=bool(named) and named != fault.owner,
               fix_named=any(w in said for w in wanted), fix_wanted=wanted,
               # the whole diagnosis: what the owner phase's prompt shows an LLM policy (prompts' failure_block)
               fix_in_diagnosis=any(w in str(first.get("diagnosis", "")) for w in wanted),
               diagnosis=str(first.get("diagnosis", ""))[:400], gate_summary=str(failed.get("summary", ""))[:300])
    return out


def report_failure_lines(report: Path, gate: str) -> str:
    """What the report tells the user about the failure: the failed gate's row of the gate table and the last
    failure line (the diagnosis as the report cuts it); not the rest (its decisions list names every file)."""
    if not report.is_file():
        return ""
    lines = report.read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if line.startswith(f"| {gate} |") or
                     line.lower().startswith("- last failure:"))


def yaml_only(fault: Fault) -> bool:
    """A fault whose edits are all on the YAML (it can be injected where the config phase writes the YAML)."""
    return bool(fault.edits) and fault.runtime is None and all(e.file == "{config}" for e in fault.edits)


def at_write(fault: Fault) -> Callable[[Any], Any]:
    """A config mutator that puts the fault into the YAML the rules config phase drafts, on its first write: the
    run's own artifact carries the fault, so a green end means the phase repaired it after a gate failed (a faulted
    YAML already in the copy is rewritten from the example before any gate sees it)."""
    def mutate(cfg: Any) -> Any:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "cfg.yaml").write_text(rt.dump(cfg), encoding="utf-8")
            apply(fault, Layout(root=root, plugin="p", modeling="p/m.py", config="cfg.yaml", launch="l.sh",
                                data=root / "train.json"))
            return rt.load((root / "cfg.yaml").read_text(encoding="utf-8"))
    return mutate


def run_fault(green: dict[str, Any], fault: Fault, work: Path, policy: str = "none",
              inject_at_write: bool = False) -> dict[str, Any]:
    folder = work / fault.id / (f"{policy}-at-write" if inject_at_write else policy)
    layout = copy_for(green, fault, folder)
    try:
        if inject_at_write:  # the copy without its YAML: the config phase drafts one and the mutator faults it
            layout.path("{config}").unlink()
        else:
            apply(fault, layout)
    except FaultError as exc:
        return {"id": fault.id, "owner": fault.owner, "error": str(exc)}
    git(layout.root, "add", "-A")
    git(layout.root, "-c", "user.name=fault", "-c", "user.email=fault@localhost", "commit", "-qm",
        f"fault {fault.id}", "--allow-empty")
    spec = faulted_spec(green, fault, layout, folder, policy)
    run_id = new_run_id(green["model"])
    started = time.monotonic()
    try:
        with Run(spec, run_id, Settings(runs_dir=folder / "runs"),
                 policy=RulesPolicy(config_mutator=at_write(fault)) if inject_at_write else None) as run:
            state = run.drive()
    except InputError as exc:  # the run refused its inputs before any gate, as `msmigrate verify` exits: scored as
        # stopped before routing, its one line checked for the fix
        state = {"exit_status": "input_error", "exit_detail": str(exc)}
        if policy != "none":
            return {"id": fault.id, "owner": fault.owner, "repaired": False, "exit_status": "input_error",
                    "detail": str(exc)[:300]}
        return {**score_stopped(fault, layout, state), "seconds": round(time.monotonic() - started, 1)}
    run_dir = folder / "runs" / run_id
    if policy == "none":
        result = {**score(fault, layout, state, run_dir), "run_dir": str(run_dir)}
    else:
        result = {"id": fault.id, "owner": fault.owner, "repaired": state.get("exit_status") == "success",
                  "injected": "at the config phase's first write" if inject_at_write else "in the copy",
                  "exit_status": state.get("exit_status"), "detail": str(state.get("exit_detail") or "")[:300],
                  **repair_path(run_dir)}
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def repair_path(run_dir: Path) -> dict[str, Any]:
    """How a full run got where it ended: the gate failures it classified on the way (gate, owner, case). None
    failed: the phase that owns the faulted artifact rewrote it on its first visit (the rules policy derives the
    plugin, YAML and launch script afresh), so the fault never reached a gate; else it was repaired after them."""
    trajectory = run_dir / "trajectory.jsonl"
    records = [json.loads(line) for line in trajectory.read_text().splitlines() if line.strip()] \
        if trajectory.is_file() else []
    failures = [f"{r.get('gate')}:{r.get('owner') or 'unknown'}:{r.get('case_id') or r.get('method')}"
                for r in records if r.get("kind") == "classify"]
    return {"gate_failures": failures, "how": "gate failures on the way" if failures else "no gate failed"}


def totals(results: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in results if "error" not in r]
    caught = [r for r in scored if r.get("gate")]
    n = len(scored)

    def count(key: str) -> int:
        return sum(1 for r in caught if r.get(key))

    stopped = [r for r in scored if not r.get("gate") and not r.get("missed")]
    return {"faults": n, "not_applied": len(results) - n, "missed": sum(1 for r in scored if r.get("missed")),
            # stopped before any gate failure was classified (the precheck refused the inputs): no routing to score
            "stopped_before_routing": len(stopped),
            "stopped_owner_right": sum(1 for r in stopped if r.get("stop_owner") == r["owner"]),
            "caught": len(caught), "routed_right": count("routed"), "owner_named": count("owner_named"),
            "abstained": count("abstained"), "wrong_owner": count("wrong"),
            "confidently_wrong": count("confidently_wrong"),
            "fix_named": count("fix_named") + sum(1 for r in stopped if r.get("fix_named")),
            "fix_in_diagnosis": count("fix_in_diagnosis"),
            "by_owner": {o: {"n": sum(1 for r in scored if r["owner"] == o),
                             "routed": sum(1 for r in caught if r["owner"] == o and r.get("routed")),
                             "named": sum(1 for r in caught if r["owner"] == o and r.get("owner_named"))}
                         for o in OWNER_TO_PHASE}}


def grouped_totals(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The totals of the faults written with the changes, and apart (``heldout``) those of the held-out group
    (faults/heldout.py, heldout2.py: written blind, never run while the classifier changed), the third, fourth,
    fifth, sixth, seventh, eighth, ninth, tenth, eleventh and twelfth blind sets (``heldout3``, ``heldout4``,
    ``heldout5``, ``heldout6``, ``heldout7``, ``heldout8``, ``heldout9``, ``heldout10``, ``heldout11``,
    ``heldout12``);
    repaired counts per group too."""
    group_of = {f.id: fault_group(f) for f in all_faults()}
    summary: dict[str, Any] = {}
    for group in GROUPS:
        rows = [r for r in results if group_of.get(r.get("id"), "main") == group]
        if not rows:
            continue
        part = totals([r for r in rows if "repaired" not in r])
        repaired = [r for r in rows if "repaired" in r]
        if repaired:
            part["repaired"] = f"{sum(1 for r in repaired if r['repaired'])}/{len(repaired)}"
            part["not_repaired"] = [r["id"] for r in repaired if not r["repaired"]]
        summary[group] = part
    return summary


def table(results: list[dict[str, Any]]) -> str:
    lines = [f"{'fault':36} {'owner':11} {'gate':4} {'said':11} {'route':7} {'ok':3} {'fix':3} case / detail"]
    for r in results:
        if "error" in r:
            lines.append(f"{r['id']:36} {r['owner']:11} NOT APPLIED: {r['error'][:80]}")
        elif "repaired" in r:
            lines.append(f"{r['id']:36} {r['owner']:11} repair run: {r['exit_status']} "
                         f"({r.get('how', '?')}: {', '.join(r.get('gate_failures') or []) or '-'}) "
                         f"{r.get('detail', '')[:80]}")
        elif not r.get("gate"):
            said = f" (G0 owner: {r['stop_owner']})" if r.get("stop_owner") else ""
            lines.append(f"{r['id']:36} {r['owner']:11} {'-':4} {'MISSED' if r.get('missed') else r['exit_status']}"
                         f"{said} {r.get('detail', '')[:80]}")
        else:
            lines.append(f"{r['id']:36} {r['owner']:11} {r['gate']:4} {str(r['named'] or 'unknown'):11} "
                         f"{r['route']:7} {'yes' if r['routed'] else 'NO':3} {'yes' if r['fix_named'] else 'no':3} "
                         f"{r.get('case_id') or r.get('method')}")
    return "\n".join(lines)


def _report_of(results_file: Path, result: dict[str, Any]) -> Path | None:
    """The verify run's report of a result (its run_dir, or where the bench puts it next to the results file)."""
    if result.get("run_dir"):
        found = Path(result["run_dir"]) / "verification_report.md"
        return found if found.is_file() else None
    found = sorted((results_file.parent / "faults" / result["id"] / "none" / "runs").glob("*/verification_report.md"))
    return found[-1] if found else None


def rescore(workdir: Path) -> Path:
    """Score every verify run already under WORKDIR/faults (an interrupted bench: results.json is written at the
    end) from its trajectory, report and evidence.json; writes WORKDIR/rescored.json and returns its path."""
    green = json.loads((workdir / "green" / GREEN_MARK).read_text())
    faults = {f.id: f for f in all_faults()}
    results = []
    for evidence in sorted((workdir / "faults").glob("*/none/runs/*/evidence.json")):
        run_dir, fault = evidence.parent, faults.get(evidence.parents[3].name)
        if fault is None:
            continue
        folder = evidence.parents[2]
        layout = Layout(root=folder / "target", plugin=green["plugin"], modeling=green["modeling"],
                        config=green["config"], launch=green["launch"], data=folder / "source" / "data" / "train.json")
        state = json.loads(evidence.read_text())
        results.append({**score(fault, layout, state, run_dir), "run_dir": str(run_dir)})
    out = workdir / "rescored.json"
    out.write_text(json.dumps({"results": results}, indent=1))
    return out


def summarize(paths: list[Path]) -> int:
    """Re-total a results file: the owner of each fault as defined now, routed / named re-derived from what the
    run recorded (route, named owner), so an earlier run is scored by the same rules as a new one."""
    faults = {f.id: f for f in all_faults()}
    merged: dict[tuple[str, bool], dict[str, Any]] = {}
    path_of: dict[str, Path] = {}
    for path in paths:
        for r in json.loads(path.read_text())["results"]:
            merged[(r.get("id"), "repaired" in r)] = r
            path_of[r.get("id")] = path
    results = [r for (fid, _), r in merged.items() if fid in faults]
    for r in results:
        if "repaired" in r or "error" in r:
            continue
        r["owner"] = faults[r["id"]].owner
        report = _report_of(path_of[r["id"]], r)
        if r.get("gate") and report is not None:  # the fix check as this version makes it: on the report
            wanted = [w.format(modeling="modeling_", plugin="mindspeed_mm/fsdp/models/", config="_config.yaml",
                               launch="finetune_") for w in faults[r["id"]].fix]
            r["fix_named"] = any(w in report_failure_lines(report, r["gate"]) for w in wanted)
        if r.get("gate"):
            named = r.get("named")
            r.update(routed=r.get("route") == OWNER_TO_PHASE[r["owner"]], owner_named=named == r["owner"],
                     wrong=bool(named) and named != r["owner"],
                     confidently_wrong=bool(named) and named != r["owner"] and
                     float(r.get("confidence") or 0) >= DECISIVE_CONFIDENCE)
        elif not r.get("missed"):
            r["stopped"] = True
            r["fix_named"] = any(w in r.get("detail", "") for w in faults[r["id"]].fix)
    print(table(results))
    summary = grouped_totals(results)
    print(json.dumps(summary, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("fault_workdir"))
    parser.add_argument("--model", default="qwen2_vl", help="the bundled fixture the green migration is built from")
    parser.add_argument("--only", default="", help="comma-separated fault ids, run in that order")
    parser.add_argument("--group", choices=("all", *GROUPS), default="all", help="only one group: the held-out "
                        "faults (faults/heldout.py, heldout2.py), the third, fourth, fifth, sixth, seventh, "
                        "eighth, ninth, tenth, eleventh or twelfth blind set (faults/heldout3.py, heldout4.py, "
                        "heldout5.py, heldout6.py, heldout7.py, heldout8.py, heldout9.py, heldout10.py, heldout11.py, "
                        "heldout12.py) or the rest")
    parser.add_argument("--target", choices=("standin", "real"), default="standin", help="the stand-in target, or a "
                        "copy of the real MindSpeed-MM checkout run by its real runtime (use its own --workdir)")
    parser.add_argument("--real-checkout", type=Path, default=None, help="the real checkout (default: "
                        "~/.cache/msmigrate/real-target/MindSpeed-MM)")
    parser.add_argument("--real-runtime", default=None, help="its runtime's python (default: "
                        "~/.cache/msmigrate/real-runtime/bin/python)")
    parser.add_argument("--repair", action="store_true", help="also run the repair subset (full rules runs)")
    parser.add_argument("--repair-only", action="store_true", help="run only the repair subset")
    parser.add_argument("--repair-at-write", action="store_true", help="run the YAML faults of the repair subset "
                        "injected where the rules config phase first writes the YAML (so a green end is a repair "
                        "after a gate failure, not a rewrite before any gate)")
    parser.add_argument("--out", type=Path, default=None, help="JSON results (default: WORKDIR/results.json)")
    parser.add_argument("--summarize", type=Path, nargs="+", default=None, help="print the table and totals of "
                        "results files (merged by fault id, a later file wins; this version's scoring and the "
                        "faults' owners as defined now) and exit")
    parser.add_argument("--rescore", type=Path, default=None, help="score the verify runs already under this "
                        "workdir (an interrupted bench) into WORKDIR/rescored.json and exit")
    args = parser.parse_args(argv)
    if args.summarize:
        return summarize(args.summarize)
    if args.rescore:
        print(rescore(args.rescore.resolve()))
        return 0
    workdir = args.workdir.resolve()
    real = real_paths(args.real_checkout, args.real_runtime) if args.target == "real" else None
    green = build_green(workdir / "green", args.model, real)
    wanted = {s for s in args.only.split(",") if s}
    by_id = {f.id: f for f in all_faults()}
    unknown = [i for i in args.only.split(",") if i and i not in by_id]
    if unknown:
        raise SystemExit(f"unknown fault ids: {', '.join(unknown)}")
    if args.group != "all":
        by_id = {i: f for i, f in by_id.items() if fault_group(f) == args.group}
    # --only runs its faults in the order given (a long run on shared cores does the ones that matter first)
    faults = [by_id[i] for i in dict.fromkeys(args.only.split(",")) if i in by_id] if wanted else list(by_id.values())
    results = []
    for fault in [] if args.repair_only or args.repair_at_write else faults:
        result = run_fault(green, fault, workdir / "faults")
        results.append(result)
        print(table([result]).splitlines()[-1], flush=True)
    if args.repair or args.repair_only:
        for fault in [f for f in faults if rules_owned(f)]:
            result = run_fault(green, fault, workdir / "faults", policy="rules")
            results.append(result)
            print(table([result]).splitlines()[-1], flush=True)
    if args.repair_at_write:
        for fault in [f for f in faults if rules_owned(f) and yaml_only(f)]:
            result = run_fault(green, fault, workdir / "faults", policy="rules", inject_at_write=True)
            results.append(result)
            print(table([result]).splitlines()[-1], flush=True)
    summary = grouped_totals(results)
    out = args.out or workdir / "results.json"
    out.write_text(json.dumps({"summary": summary, "results": results}, indent=1))
    print(table(results))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    from results_md import recorded  # benchmarks/ is the script's own folder, first on sys.path

    with recorded("bench_fault_routing"):
        rc = main()
    sys.exit(rc)
