"""Data branch A refuted: the template / mm_plugin the plan reused as they are (an existing registration whose image
token and turn format fit the source) failed G2 in a way that puts the fault in that code, so the data phase derives
the run's own entries from the source's facts (branch B: the source's chat template and its processor's media
expansion) under a new id, and the YAML selects them. The reused code is the target's, never edited: the derived
entries are added beside it.

The evidence that refutes the reuse is what G2 measured, not a message: its data parity (the reused path renders
the source's own samples differently from the source's chat template + processor: prompt ids or media-token
counts differ), or a traceback frame in the reused template / mm_plugin module. A fault in the training records
(a missing image, an empty file) refutes nothing here: those fail before parity, in the records or the dataset code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msmigrate.agent.failure_artifacts import run_artifacts
from msmigrate.agent.policies.base import PolicyView
from msmigrate.agent.policies.rules.steps import write
from msmigrate.agent.routes.fsdp2.rules.autofix import get_path, set_path
from msmigrate.knowledge.failure_context import DEFINED_IN, run_frames
from msmigrate.tools import yaml_roundtrip as rt

SELECTS = {"template": "data.dataset_param.basic_parameters.template",
           "collator": "data.dataloader_param.collate_param.collator_id"}


def _g2_record(state: dict[str, Any]) -> dict[str, Any]:
    """G2's last record (routing back to the data phase drops it from ``gates``; the history keeps it)."""
    return (state.get("gates") or {}).get("G2") or next(
        (r for r in reversed(state.get("gate_history") or []) if r.get("gate") == "G2"), {})


def parity_refutes(record: dict[str, Any]) -> str | None:
    """What G2's data parity found the reused path doing differently from the source's own processing, or None."""
    parity = (record.get("parity") or {}).get("data") or {}
    if parity.get("prompt_match") is False:
        return "its prompt ids differ from the source chat template's on the same samples (G2's data parity)"
    have, want = parity.get("media_tokens"), parity.get("source_media_tokens")
    if isinstance(have, int) and isinstance(want, int) and have != want:
        return f"it writes {have} media tokens where the source processor makes {want} (G2's data parity)"
    return None


def code_refutes(view: PolicyView, record: dict[str, Any]) -> str | None:
    """A place in the reused data-path code that G2's failure runs through: a traceback frame, or the code object
    the gate's own check traced the cause to (``defined in <path>``); None when neither is in that code (the
    records, the dataset builder, the framework's loader)."""
    plan = view.state["plan"]
    artifacts, _ = run_artifacts(view.ctx, view.state, record)
    reused = [r.strip("/") for r in artifacts.data if r != plan.get("data_plugin")]
    text = str(record.get("failure_text") or "")
    places = [(path, line) for path, line, owner in run_frames(text, artifacts) if owner == "data" and line > 0]
    places += [(m.group("path"), 0) for m in DEFINED_IN.finditer(str(record.get("summary") or "") + text)]
    for path, line in places:
        if any(f"/{r}/" in f"/{path}" or f"/{path}".endswith(f"/{r}") for r in reused):
            where = f"{Path(path).name}:{line}" if line else Path(path).name
            return f"G2's failure runs through {where}, the reused data-path code"
    return None


def reuse_refuted(view: PolicyView) -> str | None:
    """Why the reused (branch A) data path is refuted by the data-owned G2 failure that brought the run here."""
    state = view.state
    failure = state.get("last_failure") or {}
    if state["plan"].get("data_branch") != "A" or failure.get("gate") != "G2" or failure.get("owner") != "data":
        return None
    record = _g2_record(state)
    return parity_refutes(record) or code_refutes(view, record)


def derived_ids(view: PolicyView) -> dict[str, Any]:
    """The plan keys of the run's own data path: a template + mm_plugin id no registration of the target uses (the
    model's name, suffixed when taken), and a collator of its own only where the data contract needs one."""
    plan, inv = view.state["plan"], view.state.get("target_summary") or {}
    taken = {str(r.get("id")) for kind in ("templates", "mm_plugins", "collators")
             for r in inv.get(kind) or [] if isinstance(r, dict)}
    base = plan["model_id"]
    name = next(n for n in [base, f"{base}_derived", *(f"{base}_derived{i}" for i in range(2, 100))]
                if n not in taken)
    contract = plan.get("data_contract") or {}
    needs = bool(contract.get("collator_derives") or contract.get("collator_drops"))
    return {"data_branch": "B", "template": name, "mm_plugin": name,
            "collator": name if needs else plan["collator"],
            "collator_drops": list(contract.get("collator_drops") or []) if needs else plan.get("collator_drops", [])}


def yaml_selection(view: PolicyView, update: dict[str, Any]) -> dict[str, Any] | None:
    """A write of the delivered YAML with its data-path ids set to the derived ones (G2 checks the YAML when there is
    one); None when there is no YAML yet (G2 drafts one from the plan) or it already names them."""
    path = view.ctx.target / view.state["plan"]["config_path"]
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    cfg = rt.load(text)
    for key, dotted in SELECTS.items():
        if get_path(cfg, dotted) is not None:
            set_path(cfg, dotted, update[key])
    new = rt.dump(cfg)
    if new == text:
        return None
    return write(view.state["plan"]["config_path"], new,
                 f"the YAML selects the derived data path: template {update['template']}, collator {update['collator']}")
