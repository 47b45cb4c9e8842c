"""HF weights out (part of G4): the checkpoint G4's launch saved, exported to a Hugging Face folder and loaded into the
source class, must give the trained target model's logits (``probes/hf_export.py``): users then hold weights they
can serve with the source's own code. The export lands in ``runs/<run_id>/hf_export``; the record names the
converter used (the target's own where it has one for the model id, else the product's)."""

from __future__ import annotations

import time
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item, probe_runtime
from msmigrate.tools.target_checks import hf_export


def hf_export_check(deps: Any, state: dict[str, Any], checkpoint: Any,
                    media_token_id: int | None = None) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """(evidence item, problems, record) for the export round trip of ``checkpoint`` (G4's save folder)."""
    plan, ctx = state["plan"], deps.ctx
    t0 = time.time()
    res = hf_export(ctx, plugins=[plan["plugin_dir"]], model_id=plan["model_id"], checkpoint=checkpoint,
                    out=ctx.run_dir / "hf_export", config_path=ctx.target / plan["config_path"],
                    trust_remote_code=plan["route"] == "custom", media_token_id=media_token_id)
    r = (res.data.get("result") or {}) if res.data else {}
    record = {"status": ("pass" if r.get("passed") else "fail") if res.ok else "fail",
              **{k: r.get(k) for k in ("checkpoint", "export_dir", "converter", "files", "tensors", "exact",
                                       "missing", "differ", "max_abs_dlogit", "dloss", "source_loss", "target_loss",
                                       "tolerance", "source_class", "notes")},
              "problems": list(r.get("problems") or ([] if res.ok else [f"export probe: {res.error}"]))}
    ev = evidence_item("HF weights out (export, load into the source class, logits)", res.data.get("argv", []),
                       res.data.get("returncode"), t0, time.time(),
                       res.data.get("stderr_tail", "") if not res.ok else "", record, **probe_runtime(res))
    return ev, [f"hf export: {p}" for p in record["problems"]], record


def export_summary(record: dict[str, Any] | None) -> str:
    if not record:
        return "not run"
    return (f"{record.get('status')}: {record.get('tensors')} tensors {'bit-exact' if record.get('exact') else 'NOT exact'}"
            f", max |Δlogit| {record.get('max_abs_dlogit')} (source class on the export vs trained target), "
            f"converter {str(record.get('converter') or '?').split(':')[0]}"
            + "".join(f"; note: {n}" for n in record.get("notes") or []))
