"""The Megatron route's slot gates: the training slot does not launch model-parallel sizes on a CPU runtime (it
says so), launches otherwise; G6 passes only on a G4 launch of two or more ranks."""

from __future__ import annotations

from types import SimpleNamespace

import msmigrate.agent.routes.megatron.gates.slots as slots

PLAN = {"megatron": {"script_path": "s.sh", "entry": "pretrain_vlm.py"}, "parallel": {"tp": 2, "pp": 1, "cp": 1}}


def deps(tmp_path):
    return SimpleNamespace(ctx=SimpleNamespace(runtime_python="python", target=tmp_path, run_dir=tmp_path,
                                               source=tmp_path, probe_timeout_s=300.0))


def test_model_parallel_on_cpu_is_not_launched(tmp_path, monkeypatch):
    monkeypatch.setattr(slots, "megatron_training_record", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    rec = slots.gate_megatron_functional(deps(tmp_path), {"plan": PLAN, "runtime": {"device": "cpu"}})
    assert not rec["passed"] and "tp 2" in rec["needs_accelerator"] and "device is cpu" in rec["needs_accelerator"]


def test_accelerator_runtime_or_single_rank_sizes_launch(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(slots, "megatron_training_record",
                        lambda *a, **k: calls.append(a) or {"passed": True, "summary": "ok", "evidence": []})
    assert slots.gate_megatron_functional(deps(tmp_path), {"plan": PLAN, "runtime": {"device": "npu"}})["passed"]
    one = {**PLAN, "parallel": {"tp": 1, "pp": 1, "cp": 1}}
    assert slots.gate_megatron_functional(deps(tmp_path), {"plan": one, "runtime": {"device": {"kind": "cpu"}}})[
        "passed"]
    assert len(calls) == 2


def test_distributed_cites_a_g4_launch_of_two_ranks(tmp_path):
    (tmp_path / "s.sh").write_text("N=2\ntorchrun --nproc_per_node $N --nnodes 1 pretrain_vlm.py --seed 1\n")
    g4 = {"passed": True, "evidence": [{"command": "bash s.sh"}]}
    rec = slots.gate_megatron_distributed(deps(tmp_path), {"plan": PLAN, "gates": {"G4": g4}})
    assert rec["passed"] and "2 ranks" in rec["summary"] and rec["evidence"] == g4["evidence"]
    (tmp_path / "s.sh").write_text("torchrun --nproc_per_node 1 pretrain_vlm.py\n")
    assert not slots.gate_megatron_distributed(deps(tmp_path), {"plan": PLAN, "gates": {"G4": g4}})["passed"]


def test_g1_round_trips_the_converter_at_the_launchs_tp_and_pp(tmp_path, monkeypatch):
    seen = []

    def converter(deps_, state):
        seen.append({k: state["plan"].get(k) for k in ("converter_tp", "converter_pp", "converter_vpp",
                                                         "converter_llm_pp_layers")})
        return {"passed": True, "summary": "round trip identical", "evidence": [], "converter_used": "target"}

    monkeypatch.setattr(slots, "gate_megatron_converter", converter)
    monkeypatch.setattr(slots, "megatron_imports_record", lambda *a, **k: {
        "passed": True, "summary": "imports ok", "evidence": [], "failure_text": ""})
    plan = {**PLAN, "converter": "Conv", "converter_tp": 2, "converter_llm_pp_layers": [[3]],
            "parallel": {"tp": 2, "pp": 2, "cp": 1, "vpp": 2}}
    rec = slots.gate_megatron_model(deps(tmp_path), {"plan": plan})
    # the launch's sizes, with the stage split derived for the tiny model (an explicit one-stage list is dropped)
    assert seen == [{"converter_tp": 2, "converter_pp": 2, "converter_vpp": 2, "converter_llm_pp_layers": None}]
    assert rec["passed"] and "(tp=2, pp=2, vpp=2)" in rec["summary"]
