"""Config phase: YAML + launch script derived from the most similar example, patterns from the real module tree;
after a failed gate, the catalog's auto-fix (or the validator's suggestion) applied to the current YAML; the launch
script derived again when G3 sized it wrong or its dry run rejected what it hands torchrun.

Steps: 0 inspect the plugin's module tree → 1 write YAML + script (or the fix) → 2 run the G3 check → 3 done."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from msmigrate.agent.launch_dry_run_checks import verified_repair
from msmigrate.agent.launch_size import size_launch_script
from msmigrate.agent.policies.base import PolicyView, tool_call
from msmigrate.agent.policies.rules.steps import last_results, step_of, write
from msmigrate.agent.routes.fsdp2.attention_choice import launch_host_attention
from msmigrate.agent.routes.fsdp2.draft_config import (derived_script, draft_config, example_launch_script,
                                                      load_baseline, tied_embeddings)
from msmigrate.agent.routes.fsdp2.rules.autofix import (apply_failure, drop_repeated_keys, raise_minimums,
                                                        restore_named)
from msmigrate.agent.code_templates import render_template
from msmigrate.agent.routes.fsdp2.weights_load import weights_origin
from msmigrate.tools import yaml_roundtrip as rt
from msmigrate.tools.target_checks import launch_args_check


def _dump(cfg: dict[str, Any]) -> str:
    """The YAML text, written the way its example was (comments, anchors, order: a round trip)."""
    return rt.dump(cfg)


def _record(state: dict[str, Any], gate: str) -> dict[str, Any]:
    """A gate's current record, else its last run in the history (routing back to the config phase drops the config
    phase's own gates, and the later ones, from ``gates``: they are to be proved again)."""
    return state.get("gates", {}).get(gate) or next(
        (r for r in reversed(state.get("gate_history") or []) if r.get("gate") == gate), {})


def _findings(state: dict[str, Any]) -> list[dict[str, Any]]:
    """G3's findings, and the structured findings about a config key of the gate whose failure brought the run here
    (G2's cutoff check: the cutoff_len no sample's media is cut by, as data)."""
    ev = _record(state, "G3").get("evidence") or [{}]
    found = list((ev[-1].get("metrics") or {}).get("findings") or [])
    failed = (state.get("last_failure") or {}).get("gate")
    if failed and failed != "G3":
        found += _record(state, failed).get("findings") or []
    return found


def _resized_script(view: PolicyView) -> str | None:
    """The delivered launch script with its sizes set again from the plan, when G3 rejected them
    (``launch-size``: a process or node count below 1, or more processes than the accelerators G0 found); None
    otherwise."""
    plan = view.state["plan"]
    script = view.ctx.target / plan["script_path"]
    if "launch-size" not in (_record(view.state, "G3").get("finding_codes") or []) or not plan.get("launch_size") \
            or not script.is_file():
        return None
    try:
        return size_launch_script(script.read_text(encoding="utf-8"), plan["launch_size"])
    except ValueError:  # a script whose size cannot be set: nothing deterministic to do
        return None


def _example_script(view: PolicyView) -> str | None:
    """The launch script this phase derives from the similar example (sized by the plan)."""
    return example_launch_script(view.ctx.target, view.state["plan"])


def _rederived_script(view: PolicyView) -> tuple[str, str] | None:
    """(how, the launch script) when G3's dry run found that what the delivered script hands torchrun does not
    resolve, or that it stops before torchrun where the script it stands for reaches it (``launch-dry-run``: a
    quoted argument block, a cd before the launch, a line added since): the script it stands for (derived again
    from the similar example, else the version this product last wrote) where that differs from it, else the
    delivered script's own lines changed as the dry run of the change verifies (``verified_repair``); None
    otherwise."""
    plan = view.state["plan"]
    script = view.ctx.target / plan["script_path"]
    if "launch-dry-run" not in (_record(view.state, "G3").get("finding_codes") or []):
        return None
    reference = derived_script(view.ctx.target, plan)
    if reference is not None:
        return f"{reference[0]} written again", reference[1]
    if not script.is_file():
        return None
    repaired = verified_repair(plan["script_path"], view.ctx.target, lambda argv: launch_args_check(view.ctx, argv))
    return (f"{repaired[0]}, as its dry run verifies", repaired[1]) if repaired else None


def _write_step(view: PolicyView, policy: Any, tree: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    state, ctx = view.state, view.ctx
    plan = state["plan"]
    current = ctx.target / plan["config_path"]
    failure = state.get("last_failure")
    if current.is_file() and failure:
        # a key written twice is dropped in the text first: the round-trip loader refuses such a file
        text, repeated = drop_repeated_keys(current.read_text(encoding="utf-8"), _findings(state))
        cfg = rt.load(text)
        baseline, _, _ = load_baseline(ctx.target, plan["similar_case"])
        fresh = draft_config(plan, baseline, source=ctx.source, data_json=ctx.data_path, tree=tree,
                             runtime_attention=launch_host_attention(state.get("runtime")))
        fixes = repeated + apply_failure(cfg, failure, _findings(state), tree, reference=fresh)
        rederived = _rederived_script(view)
        if rederived is not None and not fixes:  # only what the script hands torchrun was wrong: the YAML stays
            return (f"Auto-fix: {plan['script_path']}: {rederived[0]} (G3's dry run: what it handed torchrun did "
                    "not resolve).", [write(plan["script_path"], rederived[1], f"launch script: {rederived[0]}")])
        resized = _resized_script(view)
        if resized is not None and not fixes:  # only the launch script's size was wrong: the YAML stays
            return (f"Auto-fix: {plan['script_path']} sized again ({plan['launch_size']['why']}).",
                    [write(plan["script_path"], resized, "launch script sized again: G3 rejected its size")])
        if not fixes:
            fixes = restore_named(cfg, failure.get("keys"), fresh)
        if not fixes:
            return (f"No deterministic fix for {failure.get('case_id') or failure.get('diagnosis', '')[:120]}; "
                    "leaving the config as it is.", [])
        text = _dump(cfg)
        if text == current.read_text():
            # the fix reproduces the file the gate just rejected: retrying it would only fail the same way
            return (f"The fix for {failure.get('case_id') or 'this failure'} leaves {plan['config_path']} "
                    "unchanged; not rewriting it.", [])
        calls = [write(plan["config_path"], text, "; ".join(fixes)[:200])]
        if resized is not None:
            calls.append(write(plan["script_path"], resized, "launch script sized again: G3 rejected its size"))
        return "Auto-fix: " + "; ".join(fixes), calls
    baseline, script, _ = load_baseline(ctx.target, plan["similar_case"])
    notes: list[str] = []
    cfg = draft_config(plan, baseline, source=ctx.source, data_json=ctx.data_path, tree=tree, notes=notes,
                       runtime_attention=launch_host_attention(state.get("runtime")))
    if failure:  # a later gate measured what a key needs before any config was written (G2 on its own draft)
        notes += raise_minimums(cfg, _findings(state))
    if policy.config_mutator is not None and not current.is_file():
        cfg = policy.config_mutator(cfg)
    calls = [write(plan["config_path"], _dump(cfg), "; ".join([f"config derived from {plan['similar_case']}"]
                                                              + notes)[:400])]
    if script:
        text = _example_script(view)
        calls.append(write(plan["script_path"], text, "launch script mirroring the similar example, sized by the "
                                                      "spec" if plan.get("launch_size") else
                                                      "launch script mirroring the similar example"))
    readme = str(Path(plan["config_path"]).parent / "README.md")
    if not (ctx.target / readme).is_file():
        calls.append(write(readme, example_readme(view, cfg), "how to point at the weights, launch, what is verified"))
    return (f"Write {plan['config_path']} and {plan['script_path']} from {plan['similar_case']}."
            + "".join(f" {n}." for n in notes)), calls


def example_readme(view: PolicyView, cfg: dict[str, Any]) -> str:
    """The example folder's README: weights, data, launch and the checks behind it, from the config just drafted."""
    state, plan = view.state, view.state["plan"]
    kind, folder = weights_origin(rt.plain(cfg))
    attr = (cfg.get("data") or {}).get("dataset_param", {}).get("attr") or {}
    size = plan.get("launch_size") or {"nproc_per_node": "the example's", "nnodes": "the example's",
                                       "why": "as the similar example's script"}
    similar = next((r for r in plan.get("reasons", []) if r.startswith("similar case ")), "")
    gates = state.get("gates", {})
    verified = [f"{label} ({g}): {gates[g]['summary']}" for g, label in (("G1", "Model"), ("G2", "Data"))
                if gates.get(g, {}).get("passed")]
    return render_template(
        "example_readme.md.j2", model_name=view.ctx.model_name, hf_class=plan.get("hf_class") or plan["model_id"],
        model_id=plan["model_id"], plugin_dir=plan["plugin_dir"], config_name=Path(plan["config_path"]).name,
        similar_case=plan["similar_case"], similar_why=similar.split(": ", 1)[1] if ": " in similar else "",
        weights={"kind": kind, "folder": folder, "converted": plan.get("weights")}, dataset=str(view.ctx.data_path), attr=attr,
        media=[m for m in ("images", "videos", "audios") if m in attr], template=plan["template"],
        collator=plan["collator"], script_path=plan["script_path"], size=size, verified=verified,
        g6_ranks=size.get("gate_ranks", 2))


def next_calls(view: PolicyView, policy: Any) -> tuple[str, list[dict[str, Any]]]:
    plan = view.state["plan"]
    step = step_of(view.messages)
    plugins = [plan["plugin_dir"], plan["data_plugin"]]
    if step == 0:
        return ("Inspect the plugin class's real module tree for apply_modules / recompute patterns.",
                [tool_call("inspect_model", {"where": "plugin", "model_id": plan["model_id"],
                                             "plugins": [plan["plugin_dir"]]}, prefix="rules")])
    if step == 1:
        res = last_results(view.messages).get("inspect_model", {})
        if not res.get("ok"):
            return f"Cannot inspect the model: {res.get('error')}", []
        tree = json.loads(Path(res["data"]["tree_file"]).read_text())
        tree["tied_embeddings"] = tied_embeddings(view.ctx.source, tree)
        return _write_step(view, policy, tree)
    if step == 2 and (view.ctx.target / plan["config_path"]).is_file():
        return ("Check the config the way G3 will.",
                [tool_call("check_config", {"config_path": plan["config_path"], "model_id": plan["model_id"],
                                            "plugins": plugins}, prefix="rules")])
    return "Config phase done; G3 decides.", []
