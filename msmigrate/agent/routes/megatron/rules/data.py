"""Data phase of the Megatron route: the data JSON pretrain_vlm.py's ``train_valid_test_datasets_provider`` reads
(``--mm-data``), from the matched example's data JSON pointed at the source's processor and samples. ``get_batch``
hands the collated batch to the assembled model as keyword arguments; which of the source's inputs that model
consumes was derived in the plan (``batch_contract``) and is stated here, so an input the forward has no parameter
for is a named gap, not a silent drop."""

from __future__ import annotations

import json
from typing import Any

from msmigrate.agent.routes.megatron.draft import draft_data_json
from msmigrate.agent.policies.base import PhaseUnsupported, PolicyView
from msmigrate.agent.policies.rules.steps import step_of, write
from msmigrate.agent.data_branch_b import propose
from msmigrate.agent.routes.megatron.plan import MEGATRON_DATA_FILES


def next_calls(view: PolicyView, policy: Any) -> tuple[str, list[dict[str, Any]]]:
    plan, ctx = view.state["plan"], view.ctx
    if step_of(view.messages) > 0:
        return "Data JSON written; G2 decides.", []
    if not plan.get("example_data_json"):
        raise PhaseUnsupported("Megatron data JSON", f"the matched example {plan.get('similar_case')} has no launch "
                               "script passing a data JSON to start from", "write the data JSON by hand, or run "
                               "with --policy llm")
    try:
        example = json.loads((ctx.target / plan["example_data_json"]).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PhaseUnsupported("Megatron data JSON", f"cannot read {plan['example_data_json']}: {exc}") from exc
    data = str(ctx.data_path or ctx.source / "data" / "train.json")
    branch_note, branch_calls = "", []
    if plan.get("data_branch") == "B":  # the example's template cannot expand the source's media token
        branch_note, branch_calls = propose(view, MEGATRON_DATA_FILES)
    draft = draft_data_json(example, str(ctx.source), data, plan.get("template"))
    contract = plan.get("batch_contract") or {}
    gap = contract.get("not_consumed") or []
    note = (f"Data JSON from {plan['example_data_json']}: " + "; ".join(draft.changes)
            + (f". get_batch passes {contract.get('consumed')} to the model"
               if contract.get("consumed") else "")
            + (f"; the model's forward has no parameter for {gap}" if gap else "") + ".")
    text = json.dumps(draft.text, indent=4, ensure_ascii=False) + "\n"
    return ((branch_note + " " if branch_note else "") + note,
            branch_calls + [write(plan["data_json_path"], text, f"Megatron data JSON for {plan['model_id']}")])
