"""The Megatron route's static gates on the stand-in: each passes on evidence it collected and fails, or says
"needs an accelerator", for the reason it names. The stand-in's runtime is this interpreter (torch, safetensors)."""
import sys

import pytest

from msmigrate.agent.routes.megatron.gates.config_gate import megatron_config_record
from msmigrate.agent.routes.megatron.gates.converter_gate import megatron_converter_record
from msmigrate.agent.routes.megatron.gates.imports_gate import megatron_imports_record
from msmigrate.agent.routes.megatron.gates.training_gate import iteration_losses, megatron_training_record
from msmigrate.testbeds.megatron_standin import EXAMPLE

PY = sys.executable


def test_config_gate(megatron_standin, standin_copy):
    rec = megatron_config_record(megatron_standin, EXAMPLE["model_json"], EXAMPLE["script"],
                                 megatron_standin / EXAMPLE["hf_dir"])
    assert rec["passed"] and "dp=2" in rec["summary"] and rec["evidence"][0]["exit_code"] == 0
    (standin_copy / EXAMPLE["script"]).write_text((standin_copy / EXAMPLE["script"]).read_text().replace("TP=1", "TP=3"))
    rec = megatron_config_record(standin_copy, EXAMPLE["model_json"], EXAMPLE["script"], None)
    assert not rec["passed"] and "not divisible by tp 3" in rec["summary"]


def test_imports_gate_passes_on_the_standin(megatron_standin):
    rec = megatron_imports_record(PY, megatron_standin)
    assert rec["passed"] and not rec["needs_accelerator"], rec["summary"]
    assert rec["evidence"][0]["metrics"]["imported"] >= 15


def test_imports_gate_names_a_missing_environment_module(standin_copy):
    adaptor = standin_copy / "mindspeed/megatron_adaptor.py"
    adaptor.write_text("from torch_npu.contrib import transfer_to_npu  # noqa\n" + adaptor.read_text())
    rec = megatron_imports_record(PY, standin_copy)
    assert not rec["passed"] and rec["needs_accelerator"] and rec["missing_modules"] == ["torch_npu"]
    assert "needs the accelerator environment" in rec["summary"]


def test_imports_gate_fails_on_the_targets_own_code(standin_copy):
    (standin_copy / "mindspeed_mm/models/vlm_model.py").write_text("def broken(:\n")
    rec = megatron_imports_record(PY, standin_copy)
    assert not rec["passed"] and not rec["needs_accelerator"]
    assert "SyntaxError" in rec["failure_text"] and "own code" in rec["summary"]


def test_converter_gate_runs_the_targets_converter(megatron_standin, tmp_path):
    rec = megatron_converter_record(PY, megatron_standin, EXAMPLE["converter"], tmp_path / "w",
                                    hf_dir=megatron_standin / EXAMPLE["hf_dir"])
    assert rec["passed"] and rec["converter_used"] == "target", rec["summary"]
    assert "57 HF tensors" in rec["summary"] and "checked on 2 layer(s)" in rec["summary"]


def test_converter_gate_round_trip_at_tp2(megatron_standin, tmp_path):
    rec = megatron_converter_record(PY, megatron_standin, EXAMPLE["converter"], tmp_path / "w",
                                    hf_dir=megatron_standin / EXAMPLE["hf_dir"], tp=2)
    assert rec["passed"] and rec["converter_used"] == "target", rec["summary"]
    assert "57 HF tensors" in rec["summary"] and "2 file(s), tp=2" in rec["summary"]
    # the per-KV-group order is read on every TP rank's shard, not only at tp=1
    assert "checked on 2 layer(s) at each of 2 TP rank(s)" in rec["summary"], rec["summary"]


def test_converter_gate_catches_a_tp_split_wrong_both_ways(standin_copy, tmp_path):
    ops = standin_copy / "checkpoint/vlm_model/operator.py"
    # rows dealt to the ranks in turn and woven back: lossless round trip, but no rank holds whole KV groups
    text = ops.read_text()
    row = text[text.index("class RowSplit"):text.index("class ColSplit")]
    wrong = row.replace("return list(value.split(_even(value.shape[0], tp_size, \"dim 0\"), dim=0))",
                        "return [value[r::tp_size] for r in range(tp_size)]").replace(
        "return torch.cat(tp_values, dim=0)", "return torch.stack(tp_values, dim=1).flatten(0, 1)")
    assert wrong != row
    ops.write_text(text.replace(row, wrong))
    rec = megatron_converter_record(PY, standin_copy, EXAMPLE["converter"], tmp_path / "w",
                                    hf_dir=standin_copy / EXAMPLE["hf_dir"], tp=2)
    assert not rec["passed"], rec["summary"]
    assert "tp rank" in rec["summary"] and "of linear_qkv.weight are not" in rec["summary"], rec["summary"]


def test_converter_gate_catches_a_tp_split_that_is_not_the_inverse(standin_copy, tmp_path):
    ops = standin_copy / "checkpoint/vlm_model/operator.py"
    # a GLU merge that puts rank blocks back gate-after-up: every rank's shard was right, the merged tensor is not
    text = ops.read_text().replace("return torch.cat([h[0] for h in halves] + [h[1] for h in halves], dim=0)",
                                   "return torch.cat([h[1] for h in halves] + [h[0] for h in halves], dim=0)")
    assert text != ops.read_text()
    ops.write_text(text)
    rec = megatron_converter_record(PY, standin_copy, EXAMPLE["converter"], tmp_path / "w",
                                    hf_dir=standin_copy / EXAMPLE["hf_dir"], tp=2)
    assert not rec["passed"], rec["summary"]
    ok = megatron_converter_record(PY, standin_copy, EXAMPLE["converter"], tmp_path / "w1",
                                   hf_dir=standin_copy / EXAMPLE["hf_dir"], tp=1)
    assert ok["passed"], ok["summary"]  # at tp=1 nothing is split, so nothing is merged wrongly


def test_converter_gate_round_trip_at_tp2_pp2(megatron_standin, tmp_path):
    rec = megatron_converter_record(PY, megatron_standin, EXAMPLE["converter"], tmp_path / "w",
                                    hf_dir=megatron_standin / EXAMPLE["hf_dir"], tp=2, pp=2)
    assert rec["passed"] and rec["converter_used"] == "target", rec["summary"]
    # 2 TP ranks x 2 stages; the text layers spread over the stages, the encoder whole on the first
    assert "4 file(s), tp=2, pp layers [[1, 1]]" in rec["summary"]
    # at tp=1 each stage is one file: the fused qkv order is checked on every layer, each at its global index
    one = megatron_converter_record(PY, megatron_standin, EXAMPLE["converter"], tmp_path / "w1",
                                    hf_dir=megatron_standin / EXAMPLE["hf_dir"], pp=2)
    assert one["passed"] and "2 file(s), tp=1" in one["summary"] and "checked on 2 layer(s)" in one["summary"]


def test_converter_gate_catches_a_pp_merge_that_is_not_the_inverse(standin_copy, tmp_path):
    merge = standin_copy / "checkpoint/vlm_model/mm_to_hf.py"
    # stages put back in reverse order: every stage's file was right, the merged layer numbers are not
    text = merge.read_text().replace("stage_ranges(counts)[0][pp_rank][0]",
                                     "stage_ranges(counts)[0][len(stages) - 1 - pp_rank][0]")
    assert text != merge.read_text()
    merge.write_text(text)
    rec = megatron_converter_record(PY, standin_copy, EXAMPLE["converter"], tmp_path / "w",
                                    hf_dir=standin_copy / EXAMPLE["hf_dir"], tp=2, pp=2)
    assert not rec["passed"] and "differs after HF -> Megatron -> HF" in rec["summary"], rec["summary"]
    ok = megatron_converter_record(PY, standin_copy, EXAMPLE["converter"], tmp_path / "w1",
                                   hf_dir=standin_copy / EXAMPLE["hf_dir"], tp=2)
    assert ok["passed"], ok["summary"]  # one stage: nothing renumbered, so nothing merged wrongly


def test_converter_gate_catches_a_wrong_qkv_order(standin_copy, tmp_path):
    ops = standin_copy / "checkpoint/vlm_model/operator.py"
    # a fusion that stacks [all q | all k | all v] and splits it back: lossless, but not Megatron's layout
    text = ops.read_text().replace(
        "        per_group = [t.chunk(self.group, dim=0) for t in tensors]\n"
        "        return torch.cat([part for trio in zip(*per_group) for part in trio], dim=0)",
        "        return torch.cat(tensors, dim=0)")
    text = text.replace(
        "        trios = [blk.split([self.q_size, self.k_size, self.v_size], dim=0) for blk in tensor.chunk(self.group, dim=0)]\n"
        "        return [torch.cat([t[j] for t in trios], dim=0) for j in range(3)]",
        "        g = self.group\n        return list(tensor.split([self.q_size * g, self.k_size * g, self.v_size * g], dim=0))")
    assert text != ops.read_text()
    ops.write_text(text)
    rec = megatron_converter_record(PY, standin_copy, EXAMPLE["converter"], tmp_path / "w",
                                    hf_dir=standin_copy / EXAMPLE["hf_dir"])
    assert not rec["passed"] and "of linear_qkv.weight are not" in rec["summary"], rec["summary"]


def test_converter_gate_falls_back_to_msmigrates_layout_check(standin_copy, tmp_path):
    conv = standin_copy / "checkpoint/vlm_model/converters/qwen2_5vl.py"
    conv.write_text("import torch_npu  # noqa\n" + conv.read_text())
    rec = megatron_converter_record(PY, standin_copy, EXAMPLE["converter"], tmp_path / "w",
                                    source=standin_copy / EXAMPLE["hf_dir"], hf_dir=standin_copy / EXAMPLE["hf_dir"])
    assert rec["passed"] and rec["converter_used"] == "msmigrate", rec["summary"]
    assert "torch_npu" in rec["summary"] and len(rec["evidence"]) == 2
    assert rec["evidence"][1]["metrics"]["kv_heads"] == 2  # the source's head counts, read from its config


def test_converter_gate_unknown_class(megatron_standin, tmp_path):
    rec = megatron_converter_record(PY, megatron_standin, "NoSuchConverter", tmp_path / "w",
                                    hf_dir=megatron_standin / EXAMPLE["hf_dir"])
    assert not rec["passed"] and "no class NoSuchConverter" in rec["summary"]


def test_training_gate_says_what_it_could_not_prove(standin_copy):
    adaptor = standin_copy / "mindspeed/megatron_adaptor.py"
    adaptor.write_text("import torch_npu  # noqa\n" + adaptor.read_text())
    rec = megatron_training_record(PY, standin_copy, EXAMPLE["script"])
    assert not rec["passed"] and rec["needs_accelerator"]
    assert "Not proven here" in rec["summary"] and "loss that falls" in rec["summary"]
    assert all(e["label"] != "megatron launch" for e in rec["evidence"])  # nothing was launched


def test_iteration_lines_are_read():
    log = (" iteration        1/       6 | consumed samples: 4 | loss: 4.930155E+00 | grad norm: 2.1 |\n"
           " iteration        2/       6 | consumed samples: 8 | lm loss: nan | grad norm: 2.0 |\nother line\n")
    got = iteration_losses(log)
    assert got[0] == (1, 6, 4.930155) and got[1][0] == 2 and got[1][2] != got[1][2]


@pytest.mark.integration
def test_training_gate_runs_the_standin(standin_copy, tmp_path):
    conv = megatron_converter_record(PY, standin_copy, EXAMPLE["converter"], tmp_path / "w",
                                     hf_dir=standin_copy / EXAMPLE["hf_dir"])
    assert conv["passed"]
    (standin_copy / EXAMPLE["mm_dir"]).parent.mkdir(parents=True)
    (tmp_path / "w" / "mm").rename(standin_copy / EXAMPLE["mm_dir"])
    rec = megatron_training_record(PY, standin_copy, EXAMPLE["script"], timeout=600)
    if rec["crashed_by_signal"]:
        # One CI run saw rank 0 abort (SIGABRT, no Python error) on 2 loaded cores, never reproduced in 12 runs
        # at load 4: a native crash of the host's gloo is not what this test proves, so one relaunch, recorded.
        print("relaunched after", rec["crashed_by_signal"], rec["failure_text"][:4000])
        rec = megatron_training_record(PY, standin_copy, EXAMPLE["script"], timeout=600)
    assert rec["passed"], rec["failure_text"][:6000]
    assert rec["evidence"][-1]["metrics"]["iterations"] == 6


@pytest.mark.integration
def test_a_rank_killed_by_a_signal_is_named_with_the_first_error(standin_copy):
    """A native crash: the record names the signal and keeps the first error line, not only torchrun's summary."""
    trainer = standin_copy / "mindspeed_mm/training.py"
    trainer.write_text(trainer.read_text().replace(
        "    torch.manual_seed(args.seed)\n",
        "    torch.manual_seed(args.seed)\n    import os as _os, sys as _sys\n"
        "    if _os.environ.get('RANK') == '0':\n"
        "        _sys.stderr.write('terminate called after throwing an instance of gloo::IoException\\n' + 'x' * 4000 + '\\n')\n"
        "        _sys.stderr.flush(); _os.abort()\n", 1))
    rec = megatron_training_record(PY, standin_copy, EXAMPLE["script"], timeout=300)
    assert not rec["passed"] and rec["crashed_by_signal"] == ["SIGABRT"], rec["summary"]
    assert "died by SIGABRT" in rec["summary"]
    assert "first error in the log:\nterminate called after throwing" in rec["failure_text"]


def test_a_converter_that_maps_nothing_does_not_pass(standin_copy, tmp_path):
    """HF names the converter does not know pass through unchanged and come back identical: not a pass."""
    from safetensors.torch import load_file, save_file

    path = standin_copy / EXAMPLE["hf_dir"] / "model.safetensors"
    sd = load_file(str(path))
    save_file({k.replace("model.layers.", "model.language_model.layers."): v for k, v in sd.items()}, str(path))
    rec = megatron_converter_record(PY, standin_copy, EXAMPLE["converter"], tmp_path / "w",
                                    hf_dir=standin_copy / EXAMPLE["hf_dir"])
    assert not rec["passed"] and "reach the Megatron checkpoint unchanged" in rec["summary"], rec["summary"]
    assert "model.language_model.layers.0" in rec["summary"]


def test_shrunk_source_config():
    import importlib.util

    from msmigrate.tools.megatron import PROBES_DIR

    spec = importlib.util.spec_from_file_location("mcr", PROBES_DIR / "megatron_converter_roundtrip.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = {"num_hidden_layers": 36, "vocab_size": 151936, "hidden_size": 2048, "num_key_value_heads": 2,
           "vision_config": {"depth": 32, "fullatt_block_indexes": [7, 15, 23, 31], "hidden_size": 1280},
           "text_config": {"num_hidden_layers": 36, "layer_types": ["full"] * 36, "vocab_size": 151936}}
    out = mod.shrink_source_config(cfg)
    assert out["num_hidden_layers"] == 2 and out["vocab_size"] == 512 and out["hidden_size"] == 2048
    assert out["vision_config"] == {"depth": 2, "fullatt_block_indexes": [1], "hidden_size": 1280}
    assert out["text_config"]["layer_types"] == ["full", "full"] and cfg["num_hidden_layers"] == 36


def test_converter_slot_picks_by_model_type_or_falls_back(megatron_standin, tmp_path):
    from types import SimpleNamespace

    from msmigrate.agent.routes.megatron.gates.converter_gate import gate_megatron_converter

    deps = SimpleNamespace(ctx=SimpleNamespace(runtime_python=PY, target=megatron_standin, run_dir=tmp_path,
                                               source=megatron_standin / EXAMPLE["hf_dir"], probe_timeout_s=300.0))
    rec = gate_megatron_converter(deps, {"plan": {"model_type": "qwen2_5_vl",
                                                  "converter_hf_dir": EXAMPLE["hf_dir"]}})
    assert rec["passed"] and rec["converter_used"] == "target" and EXAMPLE["converter"] in rec["summary"]
    rec = gate_megatron_converter(deps, {"plan": {"model_type": "llava"}})
    assert rec["passed"] and rec["converter_used"] == "msmigrate"
    assert "no weight converter for model_type 'llava'" in rec["summary"] and "not a converter" in rec["summary"]


def test_converter_gate_checks_the_vpp_layout_against_one_stage(standin_copy, tmp_path):
    """pp=2 x vpp=2 (4 flat stages over the 2 text layers): each rank's file holds model0 / model1, put back at
    their global layer numbers they equal the same converter's single-stage checkpoint, and the HF round trip runs
    on that one (the framework's mm_to_hf reads no VPP checkpoint). Virtual stages saved in the wrong order are
    caught, though every file loads and the single-stage round trip alone would pass."""
    ok = megatron_converter_record(PY, standin_copy, EXAMPLE["converter"], tmp_path / "w",
                                   hf_dir=standin_copy / EXAMPLE["hf_dir"], pp=2, vpp=2)
    assert ok["passed"], ok["summary"]
    assert "VPP layout: 4 virtual stage(s) in 2 file(s)" in ok["summary"]
    conv = standin_copy / "checkpoint/vlm_model/converters/qwen2_5vl.py"
    text = conv.read_text().replace("stages[v * pp + pp_rank]", "stages[pp_rank * vpp + v]")
    assert text != conv.read_text()
    conv.write_text(text)
    bad = megatron_converter_record(PY, standin_copy, EXAMPLE["converter"], tmp_path / "w1",
                                    hf_dir=standin_copy / EXAMPLE["hf_dir"], pp=2, vpp=2)
    assert not bad["passed"] and "past the stage's" in bad["summary"] + bad["failure_text"], bad["summary"]


def test_config_gate_refuses_a_flag_the_frameworks_own_checks_refuse(standin_copy):
    """``if args.X is not None: raise`` in the target's own code (the real validate_args patch does this for
    --num-layers-per-virtual-pipeline-stage) makes --x a G3 error; a test on other values does not."""
    patch = standin_copy / "mindspeed_mm/patchs/validate.py"
    patch.parent.mkdir(exist_ok=True)
    patch.write_text("def validate(args):\n"
                     "    if args.old_stage_layers is not None:\n        raise AssertionError('use --new-stages')\n"
                     "    if args.other is not None and args.pp == 1:\n        raise AssertionError('needs pp')\n")
    script = standin_copy / EXAMPLE["script"]
    text = script.read_text()
    assert "--pipeline-model-parallel-size ${PP} \\" in text
    script.write_text(text.replace("--pipeline-model-parallel-size ${PP} \\", "--pipeline-model-parallel-size ${PP} "
                                   "\\\n    --old-stage-layers 2 \\\n    --other 1 \\"))
    rec = megatron_config_record(standin_copy, EXAMPLE["model_json"], EXAMPLE["script"], None)
    assert not rec["passed"]
    assert "passes --old-stage-layers, which the framework refuses (mindspeed_mm/patchs/validate.py:2: use " \
           "--new-stages)" in rec["failure_text"], rec["failure_text"]
    assert "--other," not in rec["failure_text"]
