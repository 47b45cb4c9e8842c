"""Scoring one finished run from its folder alone (``evidence.json``, ``spec.yaml``, ``trajectory.jsonl``) and the
target's git history — never from what the agent says about itself.

Hard checks (all must hold for a trial to pass): gates green with evidence · parity with the source (G1 model,
G2 data, G6 sharded figures in evidence.json) · delivered config validates clean · config not weakened · every edit
inside the editable paths · the expected model_id / dataset_type / template / data branch. Soft measures: launches, policy steps, tool calls, tokens, format errors, wall time."""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml
from pydantic import ValidationError

from msmigrate.agent.config import RunSpec, Settings
from msmigrate.core.run_context import RunContext
from msmigrate.tools.worktree import branch_checkout

from msmigrate.faces.eval.check import EVIDENCE_KEYS, Check
from msmigrate.faces.eval.megatron_scorers import (check_delivered, check_honest_exit, check_new_component,
                                                   check_route, check_static_gates)

ALL_GATES = ("G0", "G1", "G2", "G3", "G4", "G5", "G6")
# YAML key paths of the expected facts in a plugin-route config (contract: model / data sections).
FACT_PATHS = {"model_id": "model.model_id", "dataset_type": "data.dataset_param.dataset_type",
              "template": "data.dataset_param.basic_parameters.template"}


@dataclass
class Validation:
    ok: bool
    findings: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


Validator = Callable[[str, Path, str], Validation]  # (config text, target root, runtime python)


@dataclass
class TrialScore:
    task_id: str
    trial: int
    run_id: str
    exit_status: str | None
    passed: bool
    first_failing_gate: str | None
    checks: list[Check]
    soft: dict[str, float]
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _get(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _git(target: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(target), *args], capture_output=True, text=True)


def check_gates(evidence: dict[str, Any]) -> Check:
    gates = evidence.get("gates") or {}
    problems = []
    for g in ALL_GATES:
        rec = gates.get(g)
        if not rec or not rec.get("passed"):
            problems.append(f"{g} {'not run' if not rec else 'failed'}")
            continue
        items = rec.get("evidence") or []
        if not items or any(any(k not in ev or ev[k] in (None, "") for k in EVIDENCE_KEYS) for ev in items):
            problems.append(f"{g} passed without complete evidence (needs {', '.join(EVIDENCE_KEYS)})")
    if evidence.get("exit_status") != "success":
        problems.append(f"exit status {evidence.get('exit_status')}")
    return Check("gates_green", not problems, "; ".join(problems) or "G0-G6 passed, each with evidence")


PARITY_CHECKS = (("G1", "model"), ("G2", "data"), ("G6", "sharded"))


def check_parity(evidence: dict[str, Any]) -> Check:
    """The parity records the gates wrote: model and data parity must pass; sharded parity must pass or say why the
    run cannot be compared with one process (``not_comparable`` + reason, shown in the detail)."""
    gates = evidence.get("gates") or {}
    problems, notes = [], []
    for gate, kind in PARITY_CHECKS:
        rec = ((gates.get(gate) or {}).get("parity") or {}).get(kind)
        if kind == "model" and (rec or {}).get("status") == "not_comparable":
            # G1's batch could not feed the source's forward: G2 re-ran the check on its collated batch
            rec = ((gates.get("G2") or {}).get("parity") or {}).get("model") or rec
        status = (rec or {}).get("status")
        if rec is None:
            problems.append(f"{gate} {kind} parity not measured")
        elif status == "pass":
            continue
        elif status == "not_comparable" and kind == "sharded" and rec.get("why_not"):
            notes.append(f"{gate} {kind} not comparable: {rec['why_not']}")
        else:
            problems.append(f"{gate} {kind} parity {status}: {'; '.join(rec.get('problems') or [])[:200]}")
    detail = "; ".join(problems + notes) or "model, data and sharded parity pass"
    return Check("parity", not problems, detail)


def edited_files(target: Path, run_id: str) -> list[str] | str:
    branch = f"msmigrate/{run_id}"
    if _git(target, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").returncode != 0:
        return []  # file_writer creates the branch with the first accepted edit: no branch, no edits
    out = _git(target, "diff", "--name-only", f"{branch}/base..{branch}")
    if out.returncode != 0:
        return f"cannot diff {branch} against its base: {out.stderr.strip()[:300]}"
    return [ln for ln in out.stdout.splitlines() if ln.strip()]


def in_editable(path: str, editable: list[str]) -> bool:
    return any(path.startswith(e) if e.endswith("/") else path == e for e in editable)


def check_scope(files: list[str] | str, editable: list[str]) -> Check:
    if isinstance(files, str):
        return Check("edits_in_scope", False, files)
    outside = [f for f in files if not in_editable(f, editable)]
    return Check("edits_in_scope", not outside,
                 f"outside the editable paths: {outside}" if outside else f"{len(files)} file(s) changed, all editable")


def delivered_config(target: Path, run_id: str, rel: str) -> str | None:
    out = _git(target, "show", f"msmigrate/{run_id}:{rel}")
    return out.stdout if out.returncode == 0 else None


def default_validator(text: str, target: Path, runtime_python: str) -> Validation:
    """The target's own argument schema (probe in the target runtime) + the strict validator, as G3 uses them."""
    from msmigrate.tools.yaml_validator import schema_from_target, validate_config

    schema = schema_from_target(target, runtime_python)
    if not schema.ok:
        return Validation(False, error=f"schema probe failed: {schema.error}")
    res = validate_config(text, schema=schema.data["schema"], target_root=target)
    return Validation(res.ok, res.data.get("findings", []), None if res.ok else res.error)


def check_config(text: str | None, rel: str, target: Path, runtime_python: str,
                 validate: Validator) -> tuple[Check, Check, dict[str, Any]]:
    if text is None:
        missing = Check("validator_clean", False, f"no delivered config {rel} on the work branch")
        return missing, Check("not_weakened", False, "no delivered config"), {}
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        bad = Check("validator_clean", False, f"{rel} is not valid YAML: {exc}")
        return bad, Check("not_weakened", False, "config unreadable"), {}
    res = validate(text, target, runtime_python)
    errors = [f for f in res.findings if f.get("severity") == "error"]
    weakened = [f for f in res.findings if str(f.get("code", "")).startswith("weakened")]
    clean = Check("validator_clean", res.ok and not errors,
                  res.error or ("; ".join(f"[{f.get('code')}] {f.get('path')}" for f in errors[:5]) or "no errors"))
    checked = res.error is None or bool(res.findings)  # findings exist even when the config is invalid
    weak = Check("not_weakened", checked and not weakened,
                 "; ".join(f"[{f.get('code')}] {f.get('path')}" for f in weakened) if weakened else
                 ("no weakening found" if checked else f"not checked: {res.error}"))
    return clean, weak, data if isinstance(data, dict) else {}


ANY_OF = "|"  # separates the accepted values of one expected fact


def check_facts(expect: dict[str, str], plan: dict[str, Any], config: dict[str, Any]) -> list[Check]:
    out = []
    for key, want in expect.items():
        got = _get(config, FACT_PATHS[key]) if key in FACT_PATHS and config else None
        where = "config"
        if got is None:
            got, where = plan.get(key), "plan"
        accepted = str(want).split(ANY_OF)  # "B|C": more than one delivery is right (suite.expectations_from_fixture)
        out.append(Check(f"expected_{key}", str(got) in accepted, f"{key}: got {got!r} (from {where}), want "
                         + " or ".join(repr(a) for a in accepted)))
    return out


def soft_measures(evidence: dict[str, Any], trajectory: Path, wall_s: float | None) -> dict[str, float]:
    c = evidence.get("counters") or {}
    out = {k: float(c.get(k, 0)) for k in ("launches", "policy_steps", "tool_calls", "tokens", "format_errors")}
    if wall_s is None and trajectory.is_file():
        times = [json.loads(ln).get("t") for ln in trajectory.read_text().splitlines() if ln.strip()]
        times = [t for t in times if isinstance(t, (int, float))]
        wall_s = (max(times) - min(times)) if times else None
    out["wall_s"] = round(float(wall_s or 0.0), 2)
    return out


def check_decline(evidence: dict[str, Any]) -> Check:
    """Where the honest outcome is a decline: the run says unsupported_by_policy, with its reason, before any
    training launch, and no gate after G0 was run on a half-done migration."""
    status, detail = evidence.get("exit_status"), str(evidence.get("exit_detail") or "")
    ran = sorted(g for g in (evidence.get("gates") or {}) if g != "G0")
    ok = status == "unsupported_by_policy" and bool(detail) and not ran
    return Check("declined_honestly", ok, f"exit {status}: {detail[:200]}" + (f"; gates run: {ran}" if ran else ""))


def first_failing_gate(evidence: dict[str, Any]) -> str | None:
    """The first gate that ran and failed. A gate that never ran did not fail: a run that declined at the plan or
    stopped before a gate has none (its exit status says what happened)."""
    gates = evidence.get("gates") or {}
    return next((g for g in ALL_GATES if g in gates and not (gates[g] or {}).get("passed")), None)


def score_run_dir(run_dir: Path, expect: dict[str, str], *, task_id: str = "", trial: int = 0,
                  validate: Validator = default_validator, wall_s: float | None = None) -> TrialScore:
    run_dir = Path(run_dir)
    run_id = run_dir.name
    ev_file, spec_file = run_dir / "evidence.json", run_dir / "spec.yaml"
    if not ev_file.is_file() or not spec_file.is_file():
        return TrialScore(task_id, trial, run_id, None, False, None, [Check("gates_green", False, "no evidence.json")],
                          soft_measures({}, run_dir / "trajectory.jsonl", wall_s), error=f"{run_dir} has no evidence.json")
    try:
        evidence = json.loads(ev_file.read_text())
        spec = RunSpec.model_validate(yaml.safe_load(spec_file.read_text()))
    except (json.JSONDecodeError, yaml.YAMLError, ValidationError) as exc:
        return TrialScore(task_id, trial, run_id, None, False, None, [Check("gates_green", False, "unreadable run")],
                          {}, error=f"{run_dir}: unreadable evidence.json / spec.yaml: {exc}")
    ctx = RunContext(run_id=run_id, run_dir=run_dir, source=spec.source, target=spec.target,
                     model_name=spec.model_name, allow_branch_b=spec.allow_branch_b,
                     extra_editable=list(spec.extra_editable))
    plan = evidence.get("plan") or {}
    expect = dict(expect)
    if expect.pop("exit_status", "success") not in ("success", "needs_accelerator"):
        checks = [check_decline(evidence), check_scope(edited_files(spec.target, run_id), ctx.editable_paths)]
        return TrialScore(task_id, trial, run_id, evidence.get("exit_status"), all(c.passed for c in checks), None,
                          checks, soft_measures(evidence, run_dir / "trajectory.jsonl", wall_s))
    if plan.get("backend") == "megatron" or expect.get("backend") == "megatron":
        return score_megatron(evidence, expect, spec, run_id, ctx, task_id, trial,
                              soft_measures(evidence, run_dir / "trajectory.jsonl", wall_s))
    rel = plan.get("config_path") or f"examples/{spec.model_name}/{spec.model_name}_config.yaml"
    with branch_checkout(spec.target, f"msmigrate/{run_id}") as tree:  # the run's worktree is gone by now
        clean, weak, config = check_config(delivered_config(spec.target, run_id, rel), rel, tree,
                                           spec.runtime_python or Settings().runtime_python, validate)
    checks = [check_gates(evidence), check_parity(evidence), clean, weak,
              check_scope(edited_files(spec.target, run_id), ctx.editable_paths),
              *check_facts(expect, plan, config)]
    first_fail = first_failing_gate(evidence)
    return TrialScore(task_id, trial, run_id, evidence.get("exit_status"), all(c.passed for c in checks), first_fail,
                      checks, soft_measures(evidence, run_dir / "trajectory.jsonl", wall_s))


def score_megatron(evidence: dict[str, Any], expect: dict[str, str], spec: RunSpec, run_id: str, ctx: RunContext,
                   task_id: str, trial: int, soft: dict[str, float]) -> TrialScore:
    plan = evidence.get("plan") or {}
    show = lambda rel: delivered_config(spec.target, run_id, rel) if rel else None  # noqa: E731
    base = lambda rel: (lambda r: r.stdout if r.returncode == 0 else None)(  # noqa: E731
        _git(spec.target, "show", f"msmigrate/{run_id}/base:{rel}"))
    new = check_new_component(expect, plan, show, base)
    # a registered new component may edit exactly its own files, once the check above found them to be that
    editable = ctx.editable_paths + (list(plan.get("editable_extra") or []) if new and new.passed else [])
    checks = [*check_route(expect, plan), check_static_gates(evidence), check_honest_exit(evidence),
              check_delivered(plan, show), *([new] if new else []),
              check_scope(edited_files(spec.target, run_id), editable)]
    first_fail = first_failing_gate(evidence)
    return TrialScore(task_id, trial, run_id, evidence.get("exit_status"), all(c.passed for c in checks), first_fail,
                      checks, soft)
