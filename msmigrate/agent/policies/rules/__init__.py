"""The deterministic expert: migrates transformers-native models with no LLM, and applies the failure catalog's
auto-fixes when a gate fails. It emits the same kind of tool calls (and trajectory records) as the LLM policy.

Each phase is a short script of steps; the step is the number of decisions already made in the phase, and a step
reads the tool results of the previous one from the phase conversation."""

from __future__ import annotations

from typing import Any, Callable

from langchain_core.messages import AIMessage

from msmigrate.agent.policies.base import Decision, PhaseUnsupported, PolicyView
from msmigrate.agent.routes.fsdp2.rules import config as fsdp2_config
from msmigrate.agent.routes.fsdp2.rules import data as fsdp2_data
from msmigrate.agent.routes.fsdp2.rules import model as fsdp2_model
from msmigrate.agent.routes.megatron.rules import config as megatron_config
from msmigrate.agent.routes.megatron.rules import data as megatron_data
from msmigrate.agent.routes.megatron.rules import model as megatron_model

PHASES = {"model": fsdp2_model, "data": fsdp2_data, "config": fsdp2_config}
# the Megatron backend route (pretrain_vlm.py): same phases, the plan's backend picks the script
MEGATRON_PHASES = {"model": megatron_model, "data": megatron_data, "config": megatron_config}


class RulesPolicy:
    name = "rules"

    def __init__(self, config_mutator: Callable[[dict[str, Any]], dict[str, Any]] | None = None):
        # Test hook: alter the first YAML this policy writes (to prove classify → fix → green end to end).
        self.config_mutator = config_mutator

    def decide(self, view: PolicyView) -> Decision:
        backend = (view.state.get("plan") or {}).get("backend")
        module = (MEGATRON_PHASES if backend == "megatron" else PHASES)[view.phase]
        try:
            # (note, calls), or (note, calls, plan_update) from a phase that re-decides its plan keys on a repair
            note, calls, *replan = module.next_calls(view, self)
        except PhaseUnsupported as exc:
            return Decision(message=AIMessage(content=exc.line), unsupported=exc.line)
        return Decision(message=AIMessage(content=note, tool_calls=calls), plan_update=replan[0] if replan else None)

    def classify(self, failure_text: str, view: PolicyView,
                 evidence: dict[str, Any] | None = None) -> dict[str, Any] | None:
        return None  # no opinion beyond the catalog: the classify node falls back to the failed gate's phase
