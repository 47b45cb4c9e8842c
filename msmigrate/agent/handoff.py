"""The phase hand-off record: what one phase leaves for the next, built when its gates pass.

Each phase starts a fresh conversation, so the next prompt must say what exists already: files written (from the
phase's accepted write/edit/vendor calls), ids the target now registers (the inventory is re-read from the target,
not remembered), what each gate proved (its summary), and the plan decisions the phase changed (from
``finish_phase``). ``state["handoff"]`` keeps one record per passed phase; the prompts render them first."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

from msmigrate.agent.state import PHASE_GATES
from msmigrate.core.run_context import BRANCH_B_FILES

WRITE_TOOLS = ("write_file", "edit_file")
ID_KINDS = ("model", "data", "template", "mm_plugin", "collator")
REGISTRY_KEYS = {"model": "model_ids", "data": "dataset_types", "template": "templates", "mm_plugin": "mm_plugins",
                 "collator": "collators"}  # id kind -> the inventory's list of its registrations
WHERE_FILES = 6  # files named per kind (a real checkout registers models in dozens)
CONTRACT_FACTS = ("meta_init", "loss_wiring", "collate_wiring")  # shown inside the contracts, not the target block


SUMMARY_CHARS = 1200  # a phase's own summary in the next prompt
GATE_SUMMARY_CHARS = 400  # each gate's summary there
CUT_MARK = " [... {cut} more chars cut]"


def cut_at_boundary(text: str, limit: int) -> str:
    """``text`` whole when it fits, else cut at the last sentence or line end within ``limit`` (a word end when the
    last such end leaves less than half of it) and marked with how much was cut: a hand-off cut mid-word ("... in the
    tex", blind live run 10) reads as if the phase had said something else."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    ends = [head.rfind(sep) + len(sep.rstrip()) for sep in (". ", "; ", "\n")]
    end = max(ends)
    if end < limit // 2:
        end = head.rfind(" ")
    if end <= 0:
        end = limit
    kept = text[:end].rstrip()
    return kept + CUT_MARK.format(cut=len(text) - len(kept))


def files_written(messages: list[AnyMessage]) -> list[str]:
    """Paths of the phase's accepted edits, in order, each once (a refused write does not count)."""
    calls = {c["id"]: c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    out: list[str] = []
    for m in messages:
        if not isinstance(m, ToolMessage) or m.tool_call_id not in calls:
            continue
        call = calls[m.tool_call_id]
        try:
            result = json.loads(str(m.content))
        except ValueError:
            continue
        if not isinstance(result, dict) or not result.get("ok"):
            continue
        data = result.get("data") or {}
        if call["name"] in WRITE_TOOLS:
            paths = [data.get("path") or call["args"].get("path")]
        elif call["name"] == "vendor_remote_code":
            paths = [c.get("to") for c in data.get("copied", [])]
        else:
            continue
        out += [p for p in paths if p and p not in out]
    return out


CHECK_PREFIX = "check_"  # the tools that run a gate's check now (check_forward, check_data, check_config, ...)
CHECK_CHARS = 600  # one check's findings in the next prompt
CHECKS_KEPT = 4  # checks carried per phase (the last turn's; a phase ends on one turn of checks + finish_phase)
# what a check result carries for the record, not for the reader: the command line, file paths it saved, timings
CHECK_NOISE = ("argv", "saved", "tree_file", "batch_file", "runtime_mode", "seconds", "returncode", "stderr_tail")
# keys that say what a check found (its warnings and mismatches): they lead the digest, so a cut never drops them
FINDING_WORDS = ("warn", "finding", "error", "mismatch", "nonfinite", "parity", "alignment", "missing", "problem")


def _names_a_finding(key: str, value: Any) -> bool:
    """``key`` or a key nested in ``value`` says what the check found."""
    if any(w in key.lower() for w in FINDING_WORDS):
        return True
    return isinstance(value, dict) and any(_names_a_finding(str(k), v) for k, v in value.items())


def _digest(value: Any) -> Any:
    """The result without CHECK_NOISE (at every level), empty values dropped, finding keys first."""
    if isinstance(value, dict):
        items = [(k, _digest(v)) for k, v in value.items() if k not in CHECK_NOISE]
        items = [(k, v) for k, v in items if v not in (None, [], {}, "")]
        items.sort(key=lambda kv: not _names_a_finding(str(kv[0]), kv[1]))
        return dict(items)
    if isinstance(value, list):
        return [_digest(v) for v in value]
    return value


def unseen_checks(messages: list[AnyMessage]) -> list[dict[str, Any]]:
    """The check results of the phase's last turn: the gate ran right after them (``finish_phase`` closed the turn)
    and passed, so the model never saw what they found — a warning, a parity note, a shifted-label loss (blind live
    run 12's player could not see why a warning was raised). Each is kept, bounded, for the next prompt."""
    newest = max((i for i, m in enumerate(messages) if isinstance(m, AIMessage)), default=-1)
    if newest < 0:
        return []
    calls = {c["id"]: c for c in messages[newest].tool_calls}
    out = []
    for m in messages[newest + 1:]:
        call = calls.get(getattr(m, "tool_call_id", None))
        if not isinstance(m, ToolMessage) or call is None or not call["name"].startswith(CHECK_PREFIX):
            continue
        try:
            result = json.loads(str(m.content))
        except ValueError:
            result = {"text": str(m.content)}
        if not isinstance(result, dict):
            result = {"text": str(result)}
        data = result.get("data") if isinstance(result.get("data"), dict) else {}
        inner = data.get("result") if isinstance(data.get("result"), dict) else {}
        found = _digest({**{k: v for k, v in data.items() if k != "result"}, **inner,
                         "error": result.get("error")})
        text = json.dumps(found, ensure_ascii=False, default=str)
        if len(text) > CHECK_CHARS:
            text = text[:CHECK_CHARS] + CUT_MARK.format(cut=len(text) - CHECK_CHARS)
        args = {k: v for k, v in (call.get("args") or {}).items() if k not in ("plugins", "trust_remote_code")}
        out.append({"tool": call["name"], "args": args, "ok": bool(result.get("ok")), "found": text})
    return out[-CHECKS_KEPT:]


def new_ids(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[str]]:
    old, new = before.get("ids") or {}, after.get("ids") or {}
    return {k: sorted(set(new.get(k, [])) - set(old.get(k, []))) for k in ID_KINDS
            if set(new.get(k, [])) - set(old.get(k, []))}


def handoff_record(phase: str, gates: dict[str, Any], messages: list[AnyMessage], finish: dict[str, Any] | None,
                   ids_added: dict[str, list[str]]) -> dict[str, Any]:
    finish = finish or {}
    return {
        "phase": phase,
        "summary": cut_at_boundary(str(finish.get("summary") or ""), SUMMARY_CHARS),
        "delivered": list(finish.get("delivered") or [])[:30],
        "decisions_changed": list(finish.get("decisions_changed") or [])[:10],
        "files_written": files_written(messages),
        "ids_registered": ids_added,
        "gates_proved": {g: cut_at_boundary(str(gates.get(g, {}).get("summary", "")), GATE_SUMMARY_CHARS)
                         for g in PHASE_GATES[phase]},
        "checks_unseen": unseen_checks(messages),
    }


def compact_target(summary: dict[str, Any]) -> dict[str, Any]:
    """What the prompts show of the target: the registered ids and the ranked similar cases, not every record."""
    keep = {"ids": summary.get("ids", {}), "headline": summary.get("headline", "")}
    # how the target's code materialises a meta-built model, sets the loss and picks the batching: the model and
    # data contracts read them (agent/nodes/plan.py and the phase templates), never as a registry listing
    for key in CONTRACT_FACTS:
        if summary.get(key):
            keep[key] = summary[key]
    # where each kind's registrations live: the file to read (or add to) without a repo_tree/grep round trip
    where = {kind: sorted({str(r.get("file")) for r in summary.get(key) or [] if isinstance(r, dict) and r.get("file")})
             for kind, key in REGISTRY_KEYS.items()}
    if any(where.values()):
        keep["registered_in"] = {k: v[:WHERE_FILES] + ([f"+{len(v) - WHERE_FILES} more"] if len(v) > WHERE_FILES
                                                       else []) for k, v in where.items() if v}
    # a dataset type is a builder function the framework calls with the YAML's data sections: its signature is the
    # contract a new dataset plugin (branch C) implements
    builders = [f"{r.get('id')}: {r.get('file')}:{r.get('line')} {r['extra']['signature']}"
                for r in summary.get("dataset_types") or []
                if isinstance(r, dict) and isinstance(r.get("extra"), dict) and r["extra"].get("signature")]
    if builders:
        keep["dataset_builders"] = builders[:WHERE_FILES]
    cases = summary.get("similar_cases") or []
    if cases:
        keep["similar_cases"] = [c.get("example") if isinstance(c, dict) else c for c in cases][:5]
    return keep


def delivered_branch(files: list[str], model_name: str) -> str | None:
    """The data branch the written files show: a dataset plugin of the model's own → C; additive registry entries
    (template / mm_plugin / collator tables) → B; neither → None (YAML only: A, or nothing data-specific)."""
    if any(f.startswith(f"mindspeed_mm/fsdp/data/datasets/{model_name}/") for f in files):
        return "C"
    if any(f in BRANCH_B_FILES for f in files):
        return "B"
    return None


def plan_revision(plan: dict[str, Any], record: dict[str, Any], model_name: str) -> dict[str, Any] | None:
    """The plan as delivered, when the passed phase did something other than planned: the changed field, and every
    decision the policy reported changing. Recorded in ``plan["revisions"]`` (the report and the eval read the
    final plan, so they name what was delivered, not what was first planned)."""
    revisions = list(plan.get("revisions") or [])
    update: dict[str, Any] = {}
    if record["phase"] == "data":
        branch = delivered_branch(record["files_written"], model_name) or (
            "A" if plan.get("data_branch") == "A" else None)
        if branch and branch != plan.get("data_branch"):
            update["data_branch"] = branch
            revisions.append({"phase": "data", "field": "data_branch", "from": plan.get("data_branch"), "to": branch,
                              "why": "files delivered: " + ", ".join(record["files_written"][:6])})
            if branch == "C":
                update["dataset_type"] = model_name
                update["data_plugin"] = f"mindspeed_mm/fsdp/data/datasets/{model_name}"
    for text in record.get("decisions_changed") or []:
        revisions.append({"phase": record["phase"], "field": "decision", "why": str(text)[:300]})
    if len(revisions) == len(plan.get("revisions") or []):
        return None
    return {**plan, **update, "revisions": revisions}
