"""The Megatron training slot's CPU preflight (gates/cpu_step_gate.py) on recorded real outputs
(tests/data/megatron_cpu_step: the readiness probe and probes/megatron_real_step.py run once on the real MindSpeed-MM
with Megatron-LM core_v0.12.1, the delivered tinyvl; the torchrun log tests/data/logs/megatron_pretrain_vlm_cpu_tp2.log).
After the conversion and the real step, torchrun of the real pretrain_vlm.py trains at TP=1 and TP=2 on the CPU and
the slot passes on its falling loss (G5 repeats TP=1, G6 cites TP=2); a flat loss fails; a step whose logits are off
the source's fails the slot without a launch; a kernel the shim lacks is named as needing the accelerator; a runtime
that cannot build keeps today's slot."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import msmigrate.agent.routes.megatron.gates.cpu_step_gate as gate
import msmigrate.agent.routes.megatron.gates.cpu_train_gate as train_gate
import msmigrate.agent.routes.megatron.gates.slots as slots
import msmigrate.tools.megatron.cpu_preflight as preflight
import msmigrate.tools.megatron.cpu_launch as cpu_launch
import msmigrate.tools.megatron.real_step as real_step
from msmigrate.agent.routes.megatron.report import megatron_section
from msmigrate.tools.megatron.cpu_preflight import ConversionRun
from msmigrate.tools.runtime import ProcessOutcome

DATA = Path(__file__).parents[1] / "data" / "megatron_cpu_step"
# torchrun of the real pretrain_vlm.py at TP=2 under the CPU shim (tests/tools/megatron/test_cpu_launch.py)
LAUNCH_LOG = (Path(__file__).parents[1] / "data" / "logs" / "megatron_pretrain_vlm_cpu_tp2.log").read_text()
RECORDED = json.loads((DATA / "recorded.json").read_text())
SCRIPT, MODEL_JSON = "examples/tinyvl/finetune_tinyvl.sh", "examples/tinyvl/model_tinyvl.json"
PLAN = {"converter": "Qwen2_5_VLConverter", "model_json_path": MODEL_JSON, "script_path": SCRIPT,
        "megatron": {"script_path": SCRIPT, "model_json_path": MODEL_JSON, "entry": "pretrain_vlm.py"},
        "parallel": {"tp": 2, "pp": 1, "cp": 1}}


def outcome(key, **over):
    return ProcessOutcome(**{**RECORDED[key], **over})


# The recorded tinyvl step predates the probe's data parity (probes/_batch_data_parity.py); its result is added as
# the figures the realmm run of llava_siglip_qwen2 printed (tests/realmm/test_megatron_new_encoder_real.py, 2026-12-06)
DATA_PARITY = {"passed": True, "problems": [], "record": 12, "tokens": 57, "media_tokens": 16,
               "source_media_tokens": 16, "trained": 13, "label_convention": "aligned", "padding_removed": 7,
               "full_match": True, "first_divergence": None, "same_text_retokenized_from": None}


def with_payload(edit, data_parity=DATA_PARITY):
    """The recorded step's stdout with its result line changed by ``edit`` (a mutation of the real payload)."""
    lines = RECORDED["real_step"]["stdout"].splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.startswith(real_step.RESULT_MARKER))
    payload = json.loads(lines[i][len(real_step.RESULT_MARKER):])
    if data_parity is not None:
        payload["data_parity"] = data_parity
    edit(payload)
    lines[i] = real_step.RESULT_MARKER + json.dumps(payload)
    return "\n".join(lines)


def setup(tmp_path, monkeypatch, ready="readiness_real", step=None, stderr=None, launch_log=LAUNCH_LOG):
    target = tmp_path / "MindSpeed-MM"
    (target / "examples" / "tinyvl").mkdir(parents=True)
    for name in ("finetune_tinyvl.sh", "model_tinyvl.json"):
        shutil.copy(DATA / name, target / "examples" / "tinyvl" / name)
    (target / "pyproject.toml").write_text('[project]\nname = "mm"\n[project.scripts]\n'
                                           'mm-convert = "checkpoint.convert_cli:main"\n')
    monkeypatch.setattr(preflight, "run_process", lambda argv, **k: outcome(ready))
    conversions = []

    def convert(python, tgt, conv, mm_dir, tp=1, **k):
        conversions.append(conv.command)
        return ConversionRun(ok=True, command=f"python -m checkpoint.convert_cli ... --cfg.mm_dir {mm_dir}",
                             delivered=conv.command, mm_dir=str(mm_dir), returncode=0,
                             changed={"--cfg.parallel_config.tp_size": ("2", str(tp))})
    monkeypatch.setattr(gate, "run_conversion", convert)
    monkeypatch.setattr(train_gate, "run_conversion", convert)
    torchruns = []

    def torchrun(argv, **k):  # the recorded real log, as if it had loaded the checkpoint this launch names
        torchruns.append(argv)
        log = launch_log.replace("/tmp/meg39a/conv_tp2/mm", argv[argv.index("--load") + 1])
        return ProcessOutcome(argv, 0, log, "", 40.0, False)
    monkeypatch.setattr(cpu_launch, "run_process", torchrun)
    over = {"stdout": step if step is not None else with_payload(lambda p: None),
            **({"stderr": stderr} if stderr is not None else {})}
    monkeypatch.setattr(real_step, "run_process", lambda argv, **k: outcome("real_step", **over))
    launches = []
    monkeypatch.setattr(slots, "megatron_training_record", lambda *a, **k: launches.append(a) or {
        "passed": True, "summary": "4 iterations", "evidence": [{"label": "megatron launch"}]})
    deps = SimpleNamespace(ctx=SimpleNamespace(runtime_python="python", target=target, run_dir=tmp_path / "run",
                                               source=tmp_path / "src", probe_timeout_s=60.0))
    return deps, conversions, launches, torchruns


def test_at_tp2_the_preflight_then_torchrun_at_tp1_and_tp2_train_on_the_cpu(tmp_path, monkeypatch):
    deps, conversions, launches, torchruns = setup(tmp_path, monkeypatch)
    rec = slots.gate_megatron_functional(deps, {"plan": PLAN, "runtime": {"device": "cpu"}})
    assert rec["passed"] and not rec["needs_accelerator"] and not launches  # the NPU launch script is not run
    assert len(conversions) == 2 and all("tp_size 2" in c and "Qwen2_5_VLConverter hf_to_mm" in c for c in conversions)
    pre = rec["cpu_preflight"]
    assert pre["readiness"]["facts"]["megatron_core"] == "0.12.1" and pre["conversion_run"]["ok"]
    assert pre["real_step"]["ok"] and {"npu_rms_norm", "npu_fusion_attention", "npu_rotary_mul"} <= {
        k.split("(")[0] for k in pre["real_step"]["kernels"]}
    assert "VLMModel built by the target's model_provider; 43 converted tensors loaded strictly" in rec["summary"]
    assert "max |diff| 0.00458 over 46 positions" in rec["summary"]
    assert (f"get_batch's batch vs the source's chat template + processor on record {DATA_PARITY['record']}: "
            f"{DATA_PARITY['tokens']} ids equal ({DATA_PARITY['media_tokens']} media tokens") in rec["summary"]
    # torchrun of the entry: TP=1 on one rank with the preflight's conversion, TP=2 on two with the tp_size 2 one
    assert [(a[a.index("--nproc_per_node") + 1], a[a.index("--tensor-model-parallel-size") + 1]) for a in torchruns] \
        == [("1", "1"), ("2", "2")]
    loads = [a[a.index("--load") + 1] for a in torchruns]
    assert loads[0] == pre["conversion_run"]["mm_dir"] and loads[1].endswith("mm_tp2")
    assert "TP=1 (1 rank): loss 6.2723 -> 5.9098 over 3 iterations" in rec["summary"]
    assert "TP=2 (2 ranks): loss 6.2723 -> 5.9098" in rec["summary"] and "--lr 1.0e-5 → 1e-3" in rec["summary"]
    assert [e["label"].split(" (")[0] for e in rec["evidence"]] == [
        "weight conversion", "real Megatron step on the CPU", "weight conversion",
        "pretrain_vlm.py under torchrun on the CPU, TP=1, 1 gloo rank(s)",
        "pretrain_vlm.py under torchrun on the CPU, TP=2, 2 gloo rank(s)"]
    assert rec["evidence"][-1]["metrics"]["losses"] == [6.27228, 6.018666, 5.909811]
    lines = megatron_section({"plan": PLAN, "gates": {"G3": {"passed": True, "conversion": {
        "command": conversions[0], "mm_dir": "ckpt/mm_path/tinyvl"}}, "G4": rec}})
    assert any(ln.startswith("- CPU preflight on the real framework (G4): converted with") for ln in lines)
    assert any(ln.startswith("- CPU training on the real framework (G4): torchrun pretrain_vlm.py") for ln in lines)
    assert not any("no gate of this run converted" in ln for ln in lines)
    # G5 repeats the TP=1 launch (same losses); G6 cites the two-rank launch
    g5 = slots.gate_megatron_reliability(deps, {"plan": PLAN, "gates": {"G4": rec}})
    assert g5["passed"] and "the same 3 losses as G4" in g5["summary"] and len(torchruns) == 3
    g6 = slots.gate_megatron_distributed(deps, {"plan": PLAN, "gates": {"G4": rec}})
    assert g6["passed"] and "TP=2 over 2 gloo ranks" in g6["summary"]
    assert [e["metrics"]["ranks"] for e in g6["evidence"]] == [2]


def test_a_cpu_launch_whose_loss_does_not_fall_fails_and_g5_g6_do_not_pass(tmp_path, monkeypatch):
    flat = re.sub(r"(\| loss: )[0-9.E+]+", r"\g<1>6.272280E+00", LAUNCH_LOG)
    deps, _, _, _ = setup(tmp_path, monkeypatch, launch_log=flat)
    rec = slots.gate_megatron_functional(deps, {"plan": PLAN, "runtime": {"device": "cpu"}})
    assert not rec["passed"] and not rec["needs_accelerator"]
    assert "TP=1: the loss did not fall: 6.27228 at iteration 1 -> 6.27228 at iteration 3" in rec["failure_text"]
    assert not slots.gate_megatron_distributed(deps, {"plan": PLAN, "gates": {"G4": rec}})["passed"]
    assert not slots.gate_megatron_reliability(deps, {"plan": PLAN, "gates": {"G4": rec}})["passed"]


def test_a_cpu_launch_stopped_by_a_kernel_the_shim_lacks_names_it_and_the_other_launch_still_runs(tmp_path,
                                                                                                  monkeypatch):
    stopped = LAUNCH_LOG[:LAUNCH_LOG.index("training ...")] + (
        "training ...\n[msmigrate megatron-cpu] no CPU reference for torch_npu.npu_swiglu\n")
    deps, _, _, torchruns = setup(tmp_path, monkeypatch, launch_log=stopped)
    rec = slots.gate_megatron_functional(deps, {"plan": PLAN, "runtime": {"device": "cpu"}})
    assert not rec["passed"] and len(torchruns) == 2
    assert "the TP=1 launch needs torch_npu.npu_swiglu" in rec["needs_accelerator"]
    assert "the TP=2 launch needs torch_npu.npu_swiglu" in rec["needs_accelerator"]


def test_without_a_tp2_conversion_the_slot_fails_and_tp1_still_runs(tmp_path, monkeypatch):
    deps, _, _, torchruns = setup(tmp_path, monkeypatch)
    monkeypatch.setattr(train_gate, "run_conversion", lambda *a, **k: ConversionRun(error="the conversion exited 1"))
    rec = slots.gate_megatron_functional(deps, {"plan": PLAN, "runtime": {"device": "cpu"}})
    assert not rec["passed"] and len(torchruns) == 1
    assert "the delivered conversion at tp_size 2 did not run through: the conversion exited 1" in rec["summary"]


def test_logits_off_the_source_fail_the_slot_without_a_launch(tmp_path, monkeypatch):
    stdout = with_payload(lambda p: p["parity"].update(max_abs_diff=0.5))
    deps, _, launches, _ = setup(tmp_path, monkeypatch, step=stdout)
    rec = slots.gate_megatron_functional(deps, {"plan": PLAN, "runtime": {"device": "cpu"}})
    assert not rec["passed"] and not rec["needs_accelerator"] and not launches
    assert "logits differ from the source's: max |diff| 0.5" in rec["failure_text"]


def test_a_step_without_data_parity_or_with_a_mismatch_fails_the_slot_without_a_launch(tmp_path, monkeypatch):
    deps, _, launches, _ = setup(tmp_path / "a", monkeypatch, step=with_payload(lambda p: None, data_parity=None))
    rec = slots.gate_megatron_functional(deps, {"plan": PLAN, "runtime": {"device": "cpu"}})
    assert not rec["passed"] and not launches
    assert "data parity of get_batch's batch vs the source's processor was not run" in rec["failure_text"]
    missing = {**DATA_PARITY, "passed": False, "problems": [
        "get_batch's input_ids leave the source processor's at position 21 of 60: get_batch has 203 'ĠWhat', the "
        "source has 4 '<image>'"]}
    deps, _, launches, _ = setup(tmp_path / "b", monkeypatch, step=with_payload(lambda p: None, data_parity=missing))
    rec = slots.gate_megatron_functional(deps, {"plan": PLAN, "runtime": {"device": "cpu"}})
    assert not rec["passed"] and not launches
    assert "position 21 of 60: get_batch has 203 'ĠWhat', the source has 4 '<image>'" in rec["failure_text"]


def test_a_checkpoint_that_does_not_load_strictly_fails(tmp_path, monkeypatch):
    def edit(p):
        p.update(ok=False, stage="load", exception="RuntimeError", message="strict load")
        p["load"].update(missing=["decoder.layers.0.self_attention.linear_qkv.weight"], loaded=False)
    deps, _, launches, _ = setup(tmp_path, monkeypatch, step=with_payload(edit))
    rec = slots.gate_megatron_functional(deps, {"plan": PLAN, "runtime": {"device": "cpu"}})
    assert not rec["passed"] and not launches and "RuntimeError at load" in rec["failure_text"]


def test_a_kernel_the_shim_lacks_is_named_as_needing_the_accelerator(tmp_path, monkeypatch):
    stdout = with_payload(lambda p: p.update(ok=False, stage="forward", exception="NotImplementedError",
                                             message="torch_npu.npu_swiglu is an NPU kernel/API with no CPU reference"))
    stderr = "[msmigrate megatron-cpu] no CPU reference for torch_npu.npu_swiglu\n" + RECORDED["real_step"]["stderr"]
    deps, _, _, _ = setup(tmp_path, monkeypatch, step=stdout, stderr=stderr)
    rec = slots.gate_megatron_functional(deps, {"plan": PLAN, "runtime": {"device": "cpu"}})
    assert not rec["passed"] and rec["needs_accelerator"].startswith("the real step needs torch_npu.npu_swiglu,")


def test_a_runtime_that_cannot_build_keeps_todays_slot(tmp_path, monkeypatch):
    deps, conversions, launches, _ = setup(tmp_path, monkeypatch, ready="readiness_standin")
    one = {**PLAN, "parallel": {"tp": 1, "pp": 1, "cp": 1}}
    rec = slots.gate_megatron_functional(deps, {"plan": one, "runtime": {"device": "cpu"}})
    assert rec["passed"] and "cpu_preflight" not in rec and not conversions and len(launches) == 1
    assert rec["summary"] == "4 iterations"


def test_on_an_accelerator_the_launch_runs_without_the_preflight(tmp_path, monkeypatch):
    deps, conversions, launches, _ = setup(tmp_path, monkeypatch)
    rec = slots.gate_megatron_functional(deps, {"plan": PLAN, "runtime": {"device": "npu"}})
    assert rec["passed"] and not conversions and len(launches) == 1 and "cpu_preflight" not in rec
