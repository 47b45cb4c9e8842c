"""The plan's backend route: fsdp2 by default, megatron when the spec needs tp/pp or forces it; a Megatron choice
ends the run with unsupported_by_policy, naming what is missing, before any work phase."""

from __future__ import annotations

from types import SimpleNamespace

from agent_fakes import FakeGates, ScriptedPolicy, make_run
from msmigrate.agent.backend_route import choose_backend
from msmigrate.agent.config import ParallelismSpec

CFG = {"text_config": {"num_attention_heads": 12, "num_key_value_heads": 2, "num_hidden_layers": 6}}


def spec(backend="auto", **par):
    return SimpleNamespace(backend=backend, parallelism=ParallelismSpec(**par) if par else None)


def test_default_and_cp_only_stay_on_fsdp2():
    assert choose_backend(spec(), CFG).backend == "fsdp2"
    c = choose_backend(spec(cp=2), CFG)
    assert c.backend == "fsdp2" and c.unsupported is None and "cp=2" in c.reasons[0]


def test_tp_or_pp_chooses_megatron_and_says_it_is_not_built():
    for par in ({"tp": 2}, {"pp": 3}):
        c = choose_backend(spec(**par), CFG)
        assert c.backend == "megatron" and c.unsupported and "not built yet" in c.unsupported
        assert "model phase" in c.unsupported and c.parallel_check["ok"]


def test_misfitting_sizes_are_named():
    c = choose_backend(spec(tp=4), CFG)  # 2 KV heads over 4 ranks
    assert not c.parallel_check["ok"] and "num_key_value_heads 2" in c.unsupported


def test_forcing():
    assert choose_backend(spec("megatron"), CFG).backend == "megatron"
    c = choose_backend(spec("fsdp2", tp=2), CFG)
    assert c.backend == "fsdp2" and "forces the fsdp2 backend" in c.unsupported


def test_megatron_run_stops_at_plan(fast_prepare, tmp_path):
    gates, policy = FakeGates(), ScriptedPolicy()
    run = make_run(fast_prepare, tmp_path, policy, gates, parallelism={"tp": 2})
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["exit_status"] == "unsupported_by_policy"
    assert gates.calls == [] and out["plan"]["backend"] == "megatron"
    first = (run.run_dir / "verification_report.md").read_text().splitlines()[0]
    assert first.startswith("**unsupported_by_policy**") and "Megatron backend route" in first


def test_default_run_records_fsdp2(fast_prepare, tmp_path):
    gates, policy = FakeGates(), ScriptedPolicy()
    run = make_run(fast_prepare, tmp_path, policy, gates)
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["plan"]["backend"] == "fsdp2" and out["exit_status"] != "unsupported_by_policy"
