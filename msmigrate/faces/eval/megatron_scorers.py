"""Scoring a Megatron-route run (plan backend ``megatron``) from its folder and the target's git history.

On a machine without an accelerator the correct outcome is ``needs_accelerator``: every gate this machine can run
(G0–G3: precheck, route modules + components + converter round trip, data JSON, model JSON + launch script) passed
with evidence, and the training slot says what it could not prove. Hard checks: the route and components expected
· static gates green with evidence · an honest exit (needs_accelerator with the reason, or success only with G4–G6
passed with evidence) · the delivered files exist and agree with the spec's sizes (pipeline_num_layers has pp x vpp
stages that sum to the layers; the script's TP/PP are the spec's) · edits in scope."""

from __future__ import annotations

import json
import re
from typing import Any

from msmigrate.faces.eval.check import EVIDENCE_KEYS, Check

STATIC_GATES = ("G0", "G1", "G2", "G3")
TRAINING_GATES = ("G4", "G5", "G6")
NEEDS_ACCELERATOR = "needs_accelerator"


def _gate_ok(rec: dict[str, Any] | None) -> bool:
    items = (rec or {}).get("evidence") or []
    return bool(rec and rec.get("passed") and items and all(all(ev.get(k) not in (None, "") for k in EVIDENCE_KEYS)
                                                            for ev in items))


def check_route(expect: dict[str, str], plan: dict[str, Any]) -> list[Check]:
    out = [Check("expected_backend", plan.get("backend") == expect.get("backend", "megatron"),
                 f"backend: got {plan.get('backend')!r}, want {expect.get('backend', 'megatron')!r}")]
    if expect.get("components"):
        want = dict(p.split("=", 1) for p in str(expect["components"]).split(",") if "=" in p)
        got = {r: (m or {}).get("model_id") for r, m in (plan.get("components") or {}).items()}
        bad = {r: got.get(r) for r, v in want.items() if str(got.get(r)) != v}
        out.append(Check("expected_components", not bad, f"got {got}, want {want}" if bad else f"components {got}"))
    return out


def check_static_gates(evidence: dict[str, Any]) -> Check:
    gates = evidence.get("gates") or {}
    bad = [g for g in STATIC_GATES if not _gate_ok(gates.get(g))]
    return Check("static_gates_green", not bad, f"not passed with evidence: {bad}" if bad else
                 "G0-G3 passed, each with evidence")


def check_honest_exit(evidence: dict[str, Any]) -> Check:
    status, gates = evidence.get("exit_status"), evidence.get("gates") or {}
    if status == "success":
        bad = [g for g in TRAINING_GATES if not _gate_ok(gates.get(g))]
        return Check("honest_exit", not bad, f"success without {bad} passed" if bad else "trained on an accelerator")
    if status == NEEDS_ACCELERATOR:
        said = [g for g in TRAINING_GATES if (gates.get(g) or {}).get("needs_accelerator")]
        claimed = [g for g in TRAINING_GATES if (gates.get(g) or {}).get("passed") and not _gate_ok(gates.get(g))]
        ok = bool(said) and not claimed and bool(evidence.get("exit_detail"))
        return Check("honest_exit", ok, f"{status}: {str(evidence.get('exit_detail'))[:200]}"
                     + (f"; passes without evidence: {claimed}" if claimed else ""))
    return Check("honest_exit", False, f"exit {status}: {str(evidence.get('exit_detail'))[:200]}")


def _stages(value: Any) -> list[int] | None:
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return value
    if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
        return [x for v in value for x in v if isinstance(x, int)]
    return None


def check_delivered(plan: dict[str, Any], show: Any) -> Check:
    """``show(rel)`` → the file's text on the run's work branch, or None."""
    par = plan.get("parallel") or {}
    problems = []
    model_text, script = show(plan.get("model_json_path", "")), show(plan.get("script_path", ""))
    if show(plan.get("data_json_path", "")) is None:
        problems.append(f"no {plan.get('data_json_path')}")
    try:
        model = json.loads(model_text) if model_text else None
    except ValueError:
        model = None
    if model is None:
        problems.append(f"no readable {plan.get('model_json_path')}")
    else:
        dec = model.get("text_decoder") or {}
        stages = _stages(dec.get("pipeline_num_layers"))
        want = par.get("pp", 1) * par.get("vpp", 1)
        if stages is None or len(stages) != want or sum(stages) != dec.get("num_layers"):
            problems.append(f"text_decoder.pipeline_num_layers {dec.get('pipeline_num_layers')} is not {want} "
                            f"stages summing to num_layers {dec.get('num_layers')}")
    if script is None:
        problems.append(f"no {plan.get('script_path')}")
    else:
        for var in ("TP", "PP", "CP"):
            m = re.search(rf"^{var}=(\d+)", script, re.M)
            if not m or int(m.group(1)) != par.get(var.lower(), 1):
                problems.append(f"script {var}={m.group(1) if m else 'missing'}, spec {par.get(var.lower(), 1)}")
    return Check("delivered_files", not problems, "; ".join(problems) or "model JSON, data JSON and launch script "
                 "on the work branch agree with the spec's sizes")


def _additive(before: str, after: str) -> bool:
    """Every line of ``before`` is still in ``after`` (an entry appended to a table moves its closing brace, so
    a trailing ``}`` / ``,`` does not count)."""
    kept = {ln.strip().rstrip("}").rstrip(",").strip() for ln in after.splitlines()}
    return all(ln.strip().rstrip("}").rstrip(",").strip() in kept for ln in before.splitlines() if ln.strip())


def _registered(design: dict[str, Any], want: str, show: Any, base: Any) -> list[str]:
    """The design's module holds its class on the work branch and its registry files only gained lines."""
    problems = []
    module = show(design.get("module_path") or "") if design else None
    if not module or f"class {design.get('class_name')}" not in module:
        problems.append(f"no class {design.get('class_name')} in {design.get('module_path')} on the work branch")
    for rel in design.get("edits") or {}:
        after, before = show(rel), base(rel)
        if after is None or want not in after:
            problems.append(f"{rel} on the work branch does not register {want!r}")
        elif before is not None and not _additive(before, after):
            problems.append(f"{rel}: lines of the framework's table were removed, not only added")
    return problems


def check_new_component(expect: dict[str, str], plan: dict[str, Any], show: Any, base: Any) -> Check | None:
    """The new component the task expects: the plan designed it under that id, its module is on the work branch
    with its class, and the registry / layer-spec files only gained lines (``show`` / ``base``: a file's text on
    the work branch / at its base, or None). None when the task expects no new component."""
    want = expect.get("new_component")
    if not want:
        return None
    new = plan.get("new_component") or {}
    problems = [] if new.get("model_id") == want else [f"new component {new.get('model_id')!r}, want {want!r}"]
    problems += _registered(new, want, show, base)
    extra = set(plan.get("editable_extra") or [])
    proj = plan.get("new_projector") or {}
    own = {new.get("module_path"), *(new.get("edits") or {})} | (
        {proj.get("module_path"), *(proj.get("edits") or {})} if proj else set())
    if extra != own:
        problems.append(f"extra editable paths {sorted(extra)} are not exactly the new components' files")
    want_proj = expect.get("new_projector")
    if want_proj:
        if proj.get("model_id") != want_proj:
            problems.append(f"new projector {proj.get('model_id')!r}, want {want_proj!r}")
        problems += _registered(proj, want_proj, show, base)
    return Check("new_component_registered", not problems, "; ".join(problems) or
                 f"{want}: {new.get('class_name')} in {new.get('module_path')}, registered in "
                 f"{sorted(new.get('edits') or {})} (additions only)"
                 + (f"; {want_proj}: {proj.get('class_name')} in {proj.get('module_path')}" if want_proj else ""))
