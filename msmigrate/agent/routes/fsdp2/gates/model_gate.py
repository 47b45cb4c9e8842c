"""G1 model: in the target runtime, the plugin packages import (as ``import_plugin`` does), ``model_id`` resolves in
``model_register``, the class builds on the meta device, and a forward with labels on a shrunk config returns a
finite ``.loss``; then model parity (``gates/parity.py``): the plugin computes what the source's own class computes,
eager and after meta init + load."""

from __future__ import annotations

import time
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item, probe_runtime
from msmigrate.agent.routes.fsdp2.gates.parity import model_parity_check, parity_summary
from msmigrate.tools.target_checks import forward_check, module_tree


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
                            sample_data=None if custom else ctx.data_path)
        r = fwd.data.get("result") or {}
        evidence.append(evidence_item("forward with labels", fwd.data.get("argv", []), fwd.data.get("returncode"), t1,
                                      time.time(), fwd.data.get("stderr_tail", "") if not fwd.ok else "",
                                      {"loss": r.get("loss"), "finite": r.get("finite"),
                                       "output_type": r.get("output_type"), "batch_keys": r.get("batch_keys"),
                                       "batch_source": r.get("batch_source"),
                                       "sample_batch_error": r.get("sample_batch_error")},
                                      **probe_runtime(fwd)))
        if not fwd.ok:
            problems.append(f"forward smoke failed: {fwd.error}")
        else:
            ev, found, parity = model_parity_check(deps, state)
            evidence.append(ev)
            problems += found
    failure = "\n".join(problems + [e["log_excerpt"] for e in evidence if e["log_excerpt"]])
    ok_summary = (f"{plan['model_id']} registered in {plan['plugin_dir']}, built on meta "
                  f"({evidence[0]['metrics']['modules']} modules), forward loss {evidence[1]['metrics'].get('loss')}; "
                  f"model parity {parity_summary(parity)}" if len(evidence) > 2 else "")
    return {"gate": "G1", "passed": not problems, "summary": "; ".join(problems) or ok_summary,
            "evidence": evidence, "failure_text": failure, "module_tree_file": tree.data.get("saved"),
            "parity": {"model": parity} if parity else {}}
