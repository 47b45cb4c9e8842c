"""The weight conversion the delivered launch script's --load needs, as the exact command on the target (read from
the target's converter entry, the delivered model JSON's per-stage layers and the script), and G3 failing a script
that loads something the conversion does not write."""

from __future__ import annotations

from msmigrate.agent.routes.megatron.gates.config_gate import megatron_config_record, with_conversion
from msmigrate.testbeds.megatron_standin import EXAMPLE
from msmigrate.tools.megatron.convert_command import conversion_command, script_load

PLAN = {"converter": EXAMPLE["converter"], "model_json_path": EXAMPLE["model_json"],
        "script_path": EXAMPLE["script"], "converter_output": EXAMPLE["mm_dir"], "parallel": {"tp": 2}}


def test_command_from_the_targets_cli_the_model_json_and_the_script(megatron_standin):
    src = megatron_standin / EXAMPLE["hf_dir"]
    c = conversion_command(megatron_standin, EXAMPLE["converter"], EXAMPLE["model_json"], EXAMPLE["script"], src,
                           2, EXAMPLE["mm_dir"])
    assert c.error is None and c.problems == [] and c.mm_dir == EXAMPLE["mm_dir"]
    assert c.command == (f'mm-convert Qwen2_5_VLConverter hf_to_mm --cfg.mm_dir "{EXAMPLE["mm_dir"]}" '
                         f'--cfg.hf_config.hf_dir "{src}" --cfg.parallel_config.llm_pp_layers [[2]] '
                         "--cfg.parallel_config.vit_pp_layers [[2]] --cfg.parallel_config.tp_size 2")


def test_script_load_reads_variables():
    assert script_load('LOAD_PATH="ckpt/mm_path/x"\ntorchrun a.py \\\n    --load $LOAD_PATH \\\n') == "ckpt/mm_path/x"
    assert script_load("torchrun a.py --load=${P}/y\nP=/abs\n") == "/abs/y"
    assert script_load("torchrun a.py --save out\n") is None


def test_g3_fails_a_script_loading_another_folder_and_shows_the_command(standin_copy):
    src = standin_copy / EXAMPLE["hf_dir"]
    base = megatron_config_record(standin_copy, EXAMPLE["model_json"], EXAMPLE["script"], src)
    assert base["passed"], base["summary"]
    ok = with_conversion(base, standin_copy, PLAN, src)
    assert ok["passed"] and "made by: mm-convert Qwen2_5_VLConverter hf_to_mm" in ok["summary"], ok["summary"]
    script = standin_copy / EXAMPLE["script"]
    script.write_text(script.read_text().replace('LOAD_PATH="ckpt/mm_path/tiny_qwen2_5_vl"',
                                                 'LOAD_PATH="ckpt/mm_path/elsewhere"'))
    bad = with_conversion(megatron_config_record(standin_copy, EXAMPLE["model_json"], EXAMPLE["script"], src),
                          standin_copy, PLAN, src)
    assert not bad["passed"] and "loads ckpt/mm_path/elsewhere, the plan converts to" in bad["summary"]
