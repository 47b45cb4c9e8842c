"""The Megatron route's report section: a failed gate (a chat format other than the source's) is listed under what
the run could not prove or failed, not only among the migration decisions, and the weight conversion the launch
script's --load needs is given as the exact command, with the statement that no gate ran it on the real weights."""

from __future__ import annotations

from msmigrate.agent.routes.megatron.report import megatron_section

COMMAND = ('mm-convert Qwen2_5_VLConverter hf_to_mm --cfg.mm_dir "ckpt/mm_path/m" --cfg.hf_config.hf_dir "/src" '
           "--cfg.parallel_config.llm_pp_layers [[2]] --cfg.parallel_config.vit_pp_layers [[2]] "
           "--cfg.parallel_config.tp_size 2")


def test_failed_gate_and_conversion_command_are_in_what_was_not_proven():
    state = {"plan": {"entry": "pretrain_vlm.py", "converter": "Qwen2_5_VLConverter", "parallel": {"tp": 2}},
             "gates": {"G1": {"passed": True, "summary": "ok"},
                       "G2": {"passed": False, "summary": "data parity: sample 0, turn 1: the text before the answer "
                                                         "differs from the source's chat template"},
                       "G3": {"passed": True, "summary": "ok",
                              "conversion": {"command": COMMAND, "mm_dir": "ckpt/mm_path/m", "problems": []}}}}
    lines = megatron_section(state)
    after = lines[lines.index("What this run could not prove, or failed:"):]
    assert any(line.startswith("- G2 failed: data parity: sample 0, turn 1") for line in after), after
    assert any("no gate of this run converted the source's checkpoint" in line and f"run exactly: `{COMMAND}`" in line
               for line in after), after
    assert f"- weight conversion (the script's `--load ckpt/mm_path/m`): `{COMMAND}`" in lines
