"""G1 model: in the target runtime, the plugin packages import (as ``import_plugin`` does), ``model_id`` resolves in
``model_register``, the class builds on the meta device, and a forward with labels on a shrunk config returns a
finite ``.loss`` (and the meta-init paths the trainer takes: a fresh init_weights path only gates where the
delivered config trains it, a config without ``training.load``; elsewhere its gap is a note); the target's own HF
weight load, as the delivered config makes its trainer run it (G4's launch runs
it before its first step: a loader that raises or leaves parameters unwritten fails here, in the model phase that
owns the plugin class it reads); then model parity (``gates/parity.py``): the plugin computes what the source's own
class computes, eager and after meta init + load."""

from __future__ import annotations

import time
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item, probe_runtime
from msmigrate.agent.routes.fsdp2.gates.master_dtype import delivered_and_baseline
from msmigrate.agent.routes.fsdp2.gates.parity import model_parity_check, parity_summary, plugin_rejections
from msmigrate.agent.routes.fsdp2.weights_load import (delivered_training, load_settings, trains_fresh_init,
                                                       weights_folder)
from msmigrate.tools.target_checks import forward_check, framework_load_check, module_tree


def gate_model(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    plan, ctx = state["plan"], deps.ctx
    plugins = [plan["plugin_dir"]]
    custom = plan["route"] == "custom"
    evidence, problems, parity = [], [], None
    t0 = time.time()
    tree = module_tree(ctx, plugins=plugins, model_id=plan["model_id"], trust_remote_code=custom)
    evidence.append(evidence_item("meta build", tree.data.get("argv", []), tree.data.get("returncode"), t0, time.time(),
                                  tree.data.get("stderr_tail", "") if not tree.ok else "",
                                  {"modules": (tree.data.get("result") or {}).get("num_modules"),
                                   "model_class": (tree.data.get("result") or {}).get("model_class")},
                                  **probe_runtime(tree)))
    if not tree.ok:
        problems.append(f"plugin does not build on meta: {tree.error}")
    else:
        t1 = time.time()
        fwd = forward_check(ctx, plugins=plugins, model_id=plan["model_id"], trust_remote_code=custom,
                            sample_data=None if custom else ctx.data_path, fresh_untrained=fresh_untrained(ctx, plan))
        r = fwd.data.get("result") or {}
        evidence.append(evidence_item("forward with labels", fwd.data.get("argv", []), fwd.data.get("returncode"), t1,
                                      time.time(), fwd.data.get("stderr_tail", "") if not fwd.ok else "",
                                      {"loss": r.get("loss"), "finite": r.get("finite"),
                                       "output_type": r.get("output_type"), "batch_keys": r.get("batch_keys"),
                                       "batch_source": r.get("batch_source"),
                                       "sample_batch_error": r.get("sample_batch_error"),
                                       "fresh_init_note": r.get("fresh_note")},
                                      **probe_runtime(fwd)))
        if not fwd.ok:
            problems.append(f"forward smoke failed: {fwd.error}")
            # the source is the oracle: its own model on the same source batch; where it runs, what fails is the plugin
            ev, found, _ = model_parity_check(deps, state)
            evidence.append(ev)
            problems += plugin_rejections(found)
        elif (loaded := framework_load(deps, plan, custom, evidence)) is not None:
            problems.append(loaded)
        else:
            ev, found, parity = model_parity_check(deps, state)
            evidence.append(ev)
            problems += found
    failure = "\n".join(problems + [e["log_excerpt"] for e in evidence if e["log_excerpt"]])
    loads = [e for e in evidence if e["label"] == "framework HF load"]
    note = evidence[1]["metrics"].get("fresh_init_note") if len(evidence) > 1 else None
    ok_summary = (f"{plan['model_id']} registered in {plan['plugin_dir']}, built on meta "
                  f"({evidence[0]['metrics']['modules']} modules), forward loss {evidence[1]['metrics'].get('loss')}; "
                  + (f"not trained by the delivered config (it loads weights), so not gating: {note}; "
                     if note else "")
                  + (f"{loads[0]['metrics']['loader']} filled {loads[0]['metrics']['parameters']} parameters; "
                     if loads else "")
                  + f"model parity {parity_summary(parity)}" if len(evidence) > 2 else "")
    return {"gate": "G1", "passed": not problems, "summary": "; ".join(problems) or ok_summary,
            "evidence": evidence, "failure_text": failure, "module_tree_file": tree.data.get("saved"),
            "parity": {"model": parity} if parity else {}}


def framework_load(deps: Any, plan: dict[str, Any], custom: bool, evidence: list[dict[str, Any]]) -> str | None:
    """The target's own HF load of the delivered config's weights into the plugin class (an evidence item); the
    problem line when it raised or left parameters unwritten, None when it passed or the config loads no HF folder."""
    ctx = deps.ctx
    settings = load_settings(*delivered_and_baseline(ctx, plan), weights_folder(plan, ctx.source))
    if settings is None:
        return None
    t0 = time.time()
    res = framework_load_check(ctx, plugins=[plan["plugin_dir"]], model_id=plan["model_id"],
                               trust_remote_code=custom, **settings)
    r = res.data.get("result") or {}
    evidence.append(evidence_item("framework HF load", res.data.get("argv", []), res.data.get("returncode"), t0,
                                  time.time(), res.data.get("stderr_tail", "") if not res.ok else "",
                                  {"loader": r.get("loader"), **settings, "parameters": r.get("parameters"),
                                   "unfilled_count": r.get("unfilled_count"), "model_class": r.get("model_class")},
                                  **probe_runtime(res)))
    if res.ok:
        return None
    return (f"the target's own HF weight load ({r.get('loader') or 'its trainer loader'}, training.load "
            f"{settings['load']}, load_strict {settings['load_strict']}), which G4's launch runs before its first "
            f"step, failed on the plugin class: {res.error}")


def fresh_untrained(ctx: Any, plan: dict[str, Any]) -> bool:
    """Whether the delivered config never trains the fresh meta-init path (it loads weights or builds with
    from_pretrained): the forward probe then records a gap of init_weights instead of failing on it."""
    return not trains_fresh_init(delivered_training(*delivered_and_baseline(ctx, plan),
                                                  weights_folder(plan, ctx.source)))
