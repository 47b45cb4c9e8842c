"""The Megatron training slot's CPU preflight (gates/cpu_step_gate.py) on recorded real outputs
(tests/data/megatron_cpu_step: the readiness probe and probes/megatron_real_step.py run once on the real MindSpeed-MM
with Megatron-LM core_v0.12.1, the delivered tinyvl). At tp=2 the conversion and the real step run and are recorded,
the launch is not, and the slot does not pass; a step whose logits are off the source's fails the slot without a
launch; a kernel the shim lacks is named as needing the accelerator; a runtime that cannot build keeps today's slot."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import msmigrate.agent.routes.megatron.gates.cpu_step_gate as gate
import msmigrate.agent.routes.megatron.gates.slots as slots
import msmigrate.tools.megatron.cpu_preflight as preflight
import msmigrate.tools.megatron.real_step as real_step
from msmigrate.agent.routes.megatron.report import megatron_section
from msmigrate.tools.megatron.cpu_preflight import ConversionRun
from msmigrate.tools.runtime import ProcessOutcome

DATA = Path(__file__).parents[1] / "data" / "megatron_cpu_step"
RECORDED = json.loads((DATA / "recorded.json").read_text())
SCRIPT, MODEL_JSON = "examples/tinyvl/finetune_tinyvl.sh", "examples/tinyvl/model_tinyvl.json"
PLAN = {"converter": "Qwen2_5_VLConverter", "model_json_path": MODEL_JSON, "script_path": SCRIPT,
        "megatron": {"script_path": SCRIPT, "model_json_path": MODEL_JSON, "entry": "pretrain_vlm.py"},
        "parallel": {"tp": 2, "pp": 1, "cp": 1}}


def outcome(key, **over):
    return ProcessOutcome(**{**RECORDED[key], **over})


def with_payload(edit):
    """The recorded step's stdout with its result line changed by ``edit`` (a mutation of the real payload)."""
    lines = RECORDED["real_step"]["stdout"].splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.startswith(real_step.RESULT_MARKER))
    payload = json.loads(lines[i][len(real_step.RESULT_MARKER):])
    edit(payload)
    lines[i] = real_step.RESULT_MARKER + json.dumps(payload)
    return "\n".join(lines)


def setup(tmp_path, monkeypatch, ready="readiness_real", step=None, stderr=None):
    target = tmp_path / "MindSpeed-MM"
    (target / "examples" / "tinyvl").mkdir(parents=True)
    for name in ("finetune_tinyvl.sh", "model_tinyvl.json"):
        shutil.copy(DATA / name, target / "examples" / "tinyvl" / name)
    (target / "pyproject.toml").write_text('[project]\nname = "mm"\n[project.scripts]\n'
                                           'mm-convert = "checkpoint.convert_cli:main"\n')
    monkeypatch.setattr(preflight, "run_process", lambda argv, **k: outcome(ready))
    conversions = []

    def convert(python, tgt, conv, mm_dir, **k):
        conversions.append(conv.command)
        return ConversionRun(ok=True, command=f"python -m checkpoint.convert_cli ... --cfg.mm_dir {mm_dir}",
                             delivered=conv.command, mm_dir=str(mm_dir), returncode=0,
                             changed={"--cfg.parallel_config.tp_size": ("2", "1")})
    monkeypatch.setattr(gate, "run_conversion", convert)
    over = {k: v for k, v in (("stdout", step), ("stderr", stderr)) if v is not None}
    monkeypatch.setattr(real_step, "run_process", lambda argv, **k: outcome("real_step", **over))
    launches = []
    monkeypatch.setattr(slots, "megatron_training_record", lambda *a, **k: launches.append(a) or {
        "passed": True, "summary": "4 iterations", "evidence": [{"label": "megatron launch"}]})
    deps = SimpleNamespace(ctx=SimpleNamespace(runtime_python="python", target=target, run_dir=tmp_path / "run",
                                               source=tmp_path / "src", probe_timeout_s=60.0))
    return deps, conversions, launches


def test_at_tp2_the_conversion_and_the_real_step_run_and_the_launch_is_said_not_run(tmp_path, monkeypatch):
    deps, conversions, launches = setup(tmp_path, monkeypatch)
    rec = slots.gate_megatron_functional(deps, {"plan": PLAN, "runtime": {"device": "cpu"}})
    assert not rec["passed"] and not launches and "tp 2" in rec["needs_accelerator"]
    assert conversions and "tp_size 2" in conversions[0] and "Qwen2_5_VLConverter hf_to_mm" in conversions[0]
    pre = rec["cpu_preflight"]
    assert pre["readiness"]["facts"]["megatron_core"] == "0.12.1" and pre["conversion_run"]["ok"]
    assert pre["real_step"]["ok"] and {"npu_rms_norm", "npu_fusion_attention", "npu_rotary_mul"} <= {
        k.split("(")[0] for k in pre["real_step"]["kernels"]}
    assert "VLMModel built by the target's model_provider; 43 converted tensors loaded strictly" in rec["summary"]
    assert "max |diff| 0.00458 over 46 positions" in rec["summary"] and "not run: tp 2" in rec["summary"]
    assert f"(the delivered launch: bash {SCRIPT})" in rec["summary"]
    assert [e["label"].split(" (")[0] for e in rec["evidence"]] == [
        "weight conversion", "real Megatron step on the CPU"]
    lines = megatron_section({"plan": PLAN, "gates": {"G3": {"passed": True, "conversion": {
        "command": conversions[0], "mm_dir": "ckpt/mm_path/tinyvl"}}, "G4": rec}})
    assert any(ln.startswith("- CPU preflight on the real framework (G4): converted with") for ln in lines)
    assert any("G4 ran this conversion on the source's weights for one rank only" in ln for ln in lines)
    assert not any("no gate of this run converted" in ln for ln in lines)


def test_at_tp1_the_launch_follows_a_passing_step_and_both_must_pass(tmp_path, monkeypatch):
    deps, _, launches = setup(tmp_path, monkeypatch)
    one = {**PLAN, "parallel": {"tp": 1, "pp": 1, "cp": 1}}
    rec = slots.gate_megatron_functional(deps, {"plan": one, "runtime": {"device": "cpu"}})
    assert rec["passed"] and len(launches) == 1 and "launch: 4 iterations" in rec["summary"]
    assert rec["evidence"][-1] == {"label": "megatron launch"}
    assert "CPU references: npu_fusion_attention, npu_rms_norm, npu_rotary_mul;" in rec["summary"]  # each once
    monkeypatch.setattr(slots, "megatron_training_record", lambda *a, **k: {
        "passed": False, "needs_accelerator": True, "summary": "not run: pretrain_vlm.py: imports need torch_npu",
        "evidence": []})
    rec = slots.gate_megatron_functional(deps, {"plan": one, "runtime": {"device": "cpu"}})
    assert not rec["passed"] and "; not run: pretrain_vlm.py: imports need torch_npu (the delivered launch" in rec[
        "summary"]


def test_logits_off_the_source_fail_the_slot_without_a_launch(tmp_path, monkeypatch):
    stdout = with_payload(lambda p: p["parity"].update(max_abs_diff=0.5))
    deps, _, launches = setup(tmp_path, monkeypatch, step=stdout)
    rec = slots.gate_megatron_functional(deps, {"plan": PLAN, "runtime": {"device": "cpu"}})
    assert not rec["passed"] and not rec["needs_accelerator"] and not launches
    assert "logits differ from the source's: max |diff| 0.5" in rec["failure_text"]


def test_a_checkpoint_that_does_not_load_strictly_fails(tmp_path, monkeypatch):
    def edit(p):
        p.update(ok=False, stage="load", exception="RuntimeError", message="strict load")
        p["load"].update(missing=["decoder.layers.0.self_attention.linear_qkv.weight"], loaded=False)
    deps, _, launches = setup(tmp_path, monkeypatch, step=with_payload(edit))
    rec = slots.gate_megatron_functional(deps, {"plan": PLAN, "runtime": {"device": "cpu"}})
    assert not rec["passed"] and not launches and "RuntimeError at load" in rec["failure_text"]


def test_a_kernel_the_shim_lacks_is_named_as_needing_the_accelerator(tmp_path, monkeypatch):
    stdout = with_payload(lambda p: p.update(ok=False, stage="forward", exception="NotImplementedError",
                                             message="torch_npu.npu_swiglu is an NPU kernel/API with no CPU reference"))
    stderr = "[msmigrate megatron-cpu] no CPU reference for torch_npu.npu_swiglu\n" + RECORDED["real_step"]["stderr"]
    deps, _, _ = setup(tmp_path, monkeypatch, step=stdout, stderr=stderr)
    rec = slots.gate_megatron_functional(deps, {"plan": PLAN, "runtime": {"device": "cpu"}})
    assert not rec["passed"] and rec["needs_accelerator"].startswith("the real step needs torch_npu.npu_swiglu,")


def test_a_runtime_that_cannot_build_keeps_todays_slot(tmp_path, monkeypatch):
    deps, conversions, launches = setup(tmp_path, monkeypatch, ready="readiness_standin")
    one = {**PLAN, "parallel": {"tp": 1, "pp": 1, "cp": 1}}
    rec = slots.gate_megatron_functional(deps, {"plan": one, "runtime": {"device": "cpu"}})
    assert rec["passed"] and "cpu_preflight" not in rec and not conversions and len(launches) == 1
    assert rec["summary"] == "4 iterations"


def test_on_an_accelerator_the_launch_runs_without_the_preflight(tmp_path, monkeypatch):
    deps, conversions, launches = setup(tmp_path, monkeypatch)
    rec = slots.gate_megatron_functional(deps, {"plan": PLAN, "runtime": {"device": "npu"}})
    assert rec["passed"] and not conversions and len(launches) == 1 and "cpu_preflight" not in rec
