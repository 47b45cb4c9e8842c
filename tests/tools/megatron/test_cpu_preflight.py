"""The CPU preflight's two steps before the real step (tools/megatron/cpu_preflight.py): the readiness verdict on
the probe's recorded outputs (the real checkout with Megatron-LM core_v0.12.1 under the shim; the project's stand-in,
whose ``megatron`` package has no initialize/get_model), and the delivered conversion command run for one rank."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from msmigrate.tools.megatron.convert_command import ConversionCommand
from msmigrate.tools.megatron.cpu_preflight import one_process_argv, one_stage, readiness_of, run_conversion

RECORDED = json.loads((Path(__file__).parents[2] / "data" / "megatron_cpu_step" / "recorded.json").read_text())
DELIVERED = ('mm-convert Qwen2_5_VLConverter hf_to_mm --cfg.mm_dir "ckpt/mm_path/tinyvl" --cfg.hf_config.hf_dir '
             '"/src" --cfg.parallel_config.llm_pp_layers [[1,1]] --cfg.parallel_config.vit_pp_layers [[2,0]] '
             "--cfg.parallel_config.tp_size 2")


def _verdict(key):
    out = RECORDED[key]
    return readiness_of(out["returncode"], out["stdout"], out["stderr"], timed_out=out["timed_out"])


def test_the_real_checkout_is_ready_and_the_standin_is_not():
    real = _verdict("readiness_real")
    assert real.ok and real.facts["megatron_core"] == "0.12.1" and real.facts["megatron_core_file"].endswith(
        "megatron/core/__init__.py")
    standin = _verdict("readiness_standin")
    assert not standin.ok and "megatron.training.initialize" in standin.reason
    assert not readiness_of(0, "", "", timed_out=True).ok
    assert not readiness_of(0, "something else\n", "").ok  # a zero exit without the probe's lines proves nothing


def test_one_process_argv_names_every_change(tmp_path):
    python = str(tmp_path / "bin" / "python")
    argv, changed = one_process_argv(DELIVERED, tmp_path / "mm", python)
    assert argv[:3] == [python, "-m", "checkpoint.convert_cli"]  # mm-convert is not installed in that runtime
    assert argv[argv.index("--cfg.mm_dir") + 1] == str(tmp_path / "mm")
    assert argv[argv.index("--cfg.parallel_config.tp_size") + 1] == "1"
    assert argv[argv.index("--cfg.parallel_config.llm_pp_layers") + 1] == "[[2]]"
    assert argv[argv.index("--cfg.hf_config.hf_dir") + 1] == "/src"
    assert set(changed) == {"--cfg.mm_dir", "--cfg.parallel_config.tp_size", "--cfg.parallel_config.llm_pp_layers",
                            "--cfg.parallel_config.vit_pp_layers", "entry"}
    assert changed["--cfg.parallel_config.tp_size"] == ("2", "1")
    assert one_stage("[[2],[2]]") == "[[4]]" and one_stage("not json") == "not json"


def _target(tmp_path, body):
    target = tmp_path / "target"
    (target / "checkpoint").mkdir(parents=True)
    (target / "checkpoint" / "__init__.py").write_text("")
    (target / "checkpoint" / "convert_cli.py").write_text(body)
    return target


WRITES = """import sys
from pathlib import Path
out = Path(sys.argv[sys.argv.index('--cfg.mm_dir') + 1])
out.mkdir(parents=True)
(out / 'latest_checkpointed_iteration.txt').write_text('release')
print('converted', sys.argv[1:])
"""


def test_run_conversion_runs_the_command_and_checks_its_output(tmp_path):
    target = _target(tmp_path, WRITES)
    res = run_conversion(sys.executable, target, ConversionCommand(command=DELIVERED), tmp_path / "mm")
    assert res.ok and res.returncode == 0 and (tmp_path / "mm" / "latest_checkpointed_iteration.txt").is_file()
    assert "checkpoint.convert_cli" in res.command and res.delivered == DELIVERED and "converted" in res.log_tail

    writes_nothing = _target(tmp_path / "b", "print('done')\n")
    res = run_conversion(sys.executable, writes_nothing, ConversionCommand(command=DELIVERED), tmp_path / "b" / "mm")
    assert not res.ok and "wrote no Megatron checkpoint" in res.error
    fails = _target(tmp_path / "c", "raise SystemExit('no such converter')\n")
    res = run_conversion(sys.executable, fails, ConversionCommand(command=DELIVERED), tmp_path / "c" / "mm")
    assert not res.ok and res.returncode == 1 and "no such converter" in res.error
    assert not run_conversion(sys.executable, target, ConversionCommand(error="no converter"), tmp_path / "x").ok
