"""Data phase. Branch A (an existing template / mm_plugin / collator fits): nothing to write — the YAML selects
them; when G2 then refutes that reuse (``data_rederive``), the run's own entries are derived as on branch B.
Branch B: additive registry edits (template + mm_plugin, and a collator when the generic one does not fit)."""

from __future__ import annotations

from typing import Any

from msmigrate.agent.policies.base import PolicyView
from msmigrate.agent import data_branch_b
from msmigrate.agent.routes.fsdp2.data_contract import DERIVABLE
from msmigrate.agent.routes.fsdp2.rules.data_rederive import derived_ids, reuse_refuted, yaml_selection
from msmigrate.agent.policies.rules.steps import step_of


def next_calls(view: PolicyView, policy: Any) -> tuple[Any, ...]:
    plan = view.state["plan"]
    refuted = reuse_refuted(view) if step_of(view.messages) == 0 else None
    if refuted:
        update = derived_ids(view)
        why = (f"the reused template {plan['template']} / mm_plugin {plan['mm_plugin']} is refuted: {refuted}; the "
               f"run's own entries '{update['template']}' are derived from the source's chat template and processor")
        note, calls = data_branch_b.propose(view, derivable=DERIVABLE, plan={**plan, **update})
        selects = yaml_selection(view, update)
        return (f"{why}. {note}", calls + ([selects] if selects else []),
                {**update, "data_branch_why": why})
    if plan["data_branch"] == "A":
        return (f"Branch A: reuse template {plan['template']} (mm_plugin {plan['mm_plugin']}) and collator "
                f"{plan['collator']}; nothing to edit.", [])
    if step_of(view.messages) > 0:
        return "Branch B registry entries written; G2 decides.", []
    return data_branch_b.propose(view, derivable=DERIVABLE)
