"""Data phase. Branch A (an existing template / mm_plugin / collator fits): nothing to write — the YAML selects
them. Branch B: additive registry edits (template + mm_plugin, and a collator when the generic one does not fit)."""

from __future__ import annotations

from typing import Any

from msmigrate.agent.policies.base import PolicyView
from msmigrate.agent.routes.fsdp2.rules import branch_b
from msmigrate.agent.policies.rules.steps import step_of


def next_calls(view: PolicyView, policy: Any) -> tuple[str, list[dict[str, Any]]]:
    plan = view.state["plan"]
    if plan["data_branch"] == "A":
        return (f"Branch A: reuse template {plan['template']} (mm_plugin {plan['mm_plugin']}) and collator "
                f"{plan['collator']}; nothing to edit.", [])
    if step_of(view.messages) > 0:
        return "Branch B registry entries written; G2 decides.", []
    return branch_b.propose(view)
