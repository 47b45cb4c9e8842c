"""The plan's backend route: fsdp2 by default, megatron when the spec needs tp/pp or forces it; the run stops at the
plan only when the route cannot be carried out (sizes that do not fit, a target without pretrain_vlm.py)."""

from __future__ import annotations

from types import SimpleNamespace

from agent_fakes import FakeGates, ScriptedPolicy, make_run
from msmigrate.agent.backend_route import choose_backend, route_gates
from msmigrate.agent.config import ParallelismSpec

CFG = {"text_config": {"num_attention_heads": 12, "num_key_value_heads": 2, "num_hidden_layers": 6}}


def spec(backend="auto", **par):
    return SimpleNamespace(backend=backend, parallelism=ParallelismSpec(**par) if par else None)


def test_default_and_cp_only_stay_on_fsdp2():
    assert choose_backend(spec(), CFG).backend == "fsdp2"
    c = choose_backend(spec(cp=2), CFG)
    assert c.backend == "fsdp2" and c.unsupported is None and "cp=2" in c.reasons[0]


def test_tp_or_pp_chooses_megatron(tmp_path):
    (tmp_path / "pretrain_vlm.py").write_text("")
    for par in ({"tp": 2}, {"pp": 3}):
        c = choose_backend(spec(**par), CFG, tmp_path)
        assert c.backend == "megatron" and c.unsupported is None and c.parallel_check["ok"]


def test_target_without_the_entry_point_stops(tmp_path):
    c = choose_backend(spec(tp=2), CFG, tmp_path)
    assert c.backend == "megatron" and "has no pretrain_vlm.py" in c.unsupported


def test_misfitting_sizes_are_named():
    c = choose_backend(spec(tp=4), CFG)  # 2 KV heads over 4 ranks
    assert not c.parallel_check["ok"] and "num_key_value_heads 2" in c.unsupported


def test_forcing():
    assert choose_backend(spec("megatron"), CFG).backend == "megatron"
    c = choose_backend(spec("fsdp2", tp=2), CFG)
    assert c.backend == "fsdp2" and "forces the fsdp2 backend" in c.unsupported


def test_megatron_run_on_an_fsdp2_only_target_fails_precheck(fast_prepare, tmp_path):
    gates, policy = FakeGates(), ScriptedPolicy()
    run = make_run(fast_prepare, tmp_path, policy, gates, parallelism={"tp": 2})
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["exit_status"] == "precheck_failed" and gates.calls == []
    assert "lacks pretrain_vlm.py" in out["exit_detail"] and "Megatron backend route" in out["exit_detail"]


def test_route_gates_dispatch_on_the_plans_backend():
    fsdp2 = {"G1": lambda d, s: {"gate": "G1", "route": "fsdp2"}}
    megatron = {"G1": lambda d, s: {"gate": "G1", "route": "megatron"}}
    gates = route_gates(fsdp2, megatron)
    assert gates["G1"](None, {"plan": {"backend": "megatron"}})["route"] == "megatron"
    assert gates["G1"](None, {"plan": {"backend": "fsdp2"}})["route"] == "fsdp2"
    assert gates["G1"](None, {})["route"] == "fsdp2"


def test_default_run_records_fsdp2(fast_prepare, tmp_path):
    gates, policy = FakeGates(), ScriptedPolicy()
    run = make_run(fast_prepare, tmp_path, policy, gates)
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["plan"]["backend"] == "fsdp2" and out["exit_status"] != "unsupported_by_policy"


class RecordingChatModel:
    """What the LLM policy would send an endpoint: the tool schemas bound and the messages of one request."""

    def __init__(self):
        self.schemas, self.messages = [], []

    def bind_tools(self, schemas):
        self.schemas = schemas
        return self

    def invoke(self, messages):
        from langchain_core.messages import AIMessage

        self.messages = messages
        return AIMessage(content="done")


def test_llm_policy_runs_a_megatron_plan_with_the_routes_prompts_and_tools(tmp_path):
    from msmigrate.agent.config import LLMSettings
    from msmigrate.agent.policies.base import PolicyView
    from msmigrate.agent.policies.llm import LLMPolicy
    from msmigrate.agent.runner import build_tools
    from msmigrate.core.run_context import RunContext
    from msmigrate.prompts.sample_state import sample_megatron_plan

    ctx = RunContext("t", tmp_path / "run", tmp_path / "src", tmp_path / "tgt", "tinyvl")
    tools, chat = build_tools(ctx), RecordingChatModel()
    policy = LLMPolicy(chat, LLMSettings(), knowledge_index="- [doc] megatron-route: the five interfaces")
    sent = {}
    for phase in ("model", "data", "config"):
        view = PolicyView(phase=phase, state={"plan": sample_megatron_plan()}, messages=[], tools=tools, ctx=ctx)
        d = policy.decide(view)
        assert d.unsupported is None and d.message.content == "done"
        system, node = (str(m.content) for m in chat.messages[:2])
        sent[phase] = {s["function"]["name"] for s in chat.schemas}
        assert "Megatron backend" in system and "NON_MEGATRON=true" not in system
        assert "Plan (Megatron route)" in node and "`qwen2_5_lm`" in node and "mindspeed_mm/fsdp/models" not in node
    assert "convert_weights" in sent["model"] and "parallel sizes tp=2, pp=1, cp=1, vpp=1" in node
    assert "check_megatron_data" in sent["data"] and {"check_parallel_sizes", "check_megatron_config"} <= sent["config"]
    assert not any(sent[p] & {"check_forward", "check_config", "vendor_remote_code"} for p in sent)
    # the FSDP2 route is unchanged: its prompts, none of the Megatron tools
    view = PolicyView(phase="model", state={"plan": {"route": "T", "data_branch": "A", "model_id": "x", "template": "t",
                                                     "collator": "c", "similar_case": None, "reasons": []}},
                      messages=[], tools=tools, ctx=ctx)
    policy.decide(view)
    assert "plugin-style FSDP2" in str(chat.messages[0].content)
    assert not {s["function"]["name"] for s in chat.schemas} & {"convert_weights", "check_megatron_config"}
