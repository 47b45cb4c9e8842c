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


def test_llm_policy_declines_a_megatron_plan():
    from msmigrate.agent.policies.base import PolicyView
    from msmigrate.agent.policies.llm import LLMPolicy

    policy = LLMPolicy.__new__(LLMPolicy)  # no chat model needed: the guard answers before any request
    view = PolicyView(phase="model", state={"plan": {"backend": "megatron"}}, messages=[], tools=[], ctx=None)
    d = policy.decide(view)
    assert d.unsupported and "--policy rules" in d.unsupported
