"""The CPU launch of the real pretrain_vlm.py (tools/megatron/cpu_launch.py) and its log verdict (train_log.py), on a
recorded real log: tests/data/logs/megatron_pretrain_vlm_cpu_tp2.log is torchrun of MindSpeed-MM's pretrain_vlm.py
(Megatron-LM core_v0.12.1) at TP=2 over two gloo ranks under msmigrate's CPU shim, 3 iterations of the delivered
tinyvl (its start and its end kept, the argument dump between left out). Finite and falling passes; NaN, a flat or
rising loss, a missing iteration, a checkpoint not loaded, a non-zero exit, a missing kernel each say why."""

from __future__ import annotations

import re
from pathlib import Path

import msmigrate.tools.megatron.cpu_launch as cpu_launch_mod
from msmigrate.tools.megatron.cpu_launch import CPU_LR, CpuLaunch, cpu_launch, launch_flags, launch_result
from msmigrate.tools.megatron.train_log import loaded_from, training_verdict
from msmigrate.tools.runtime import ProcessOutcome

LOG = (Path(__file__).parents[2] / "data" / "logs" / "megatron_pretrain_vlm_cpu_tp2.log").read_text()
LOAD = "/tmp/meg39a/conv_tp2/mm"  # the converted checkpoint the recorded run loaded


def with_losses(log: str, values: list[str]) -> str:
    """The recorded log with its iteration lines' losses replaced, in order."""
    it = iter(values)
    return re.sub(r"(\| loss: )([-+0-9.eEnaNinf]+)", lambda m: m.group(1) + next(it), log)


def test_the_recorded_real_log_passes_finite_and_falling():
    losses, problems = training_verdict(LOG, 3)
    assert losses == [(1, 6.27228), (2, 6.018666), (3, 5.909811)] and problems == []
    assert loaded_from(LOG) == [LOAD]


def test_nan_flat_rising_and_missing_iterations_fail():
    _, nan = training_verdict(with_losses(LOG, ["6.27", "nan", "5.9"]), 3)
    assert nan == ["non-finite loss at iteration(s) [2]"]
    _, flat = training_verdict(with_losses(LOG, ["6.272280E+00"] * 3), 3)
    assert flat == ["the loss did not fall: 6.27228 at iteration 1 -> 6.27228 at iteration 3"]
    _, rising = training_verdict(with_losses(LOG, ["5.9", "6.0", "6.3"]), 3)
    assert rising and rising[0].startswith("the loss did not fall")
    _, short = training_verdict(LOG, 5)
    assert short == ["3 iteration line(s) with a loss, --train-iters is 5"]
    _, none = training_verdict("no iterations here\n", 3)
    assert none == ["no Megatron iteration line with a loss in the log"]
    counted = LOG.replace("number of nan iterations:   0 |", "number of nan iterations:   1 |", 1)
    assert training_verdict(counted, 3)[1] == ["Megatron counted skipped/NaN iterations: 1"]


def test_launch_flags_keep_the_delivery_and_name_every_change():
    delivered = {"--tensor-model-parallel-size": "2", "--micro-batch-size": "2", "--global-batch-size": "8",
                 "--train-iters": "10000", "--lr": "1.0e-5", "--lr-warmup-fraction": "0.1", "--load": "ckpt/mm",
                 "--distributed-backend": "nccl", "--bf16": True, "--mm-model": "./m.json", "--mm-data": "./d.json"}
    argv, changed = launch_flags(delivered, tp=2, ranks=2, load="/w/mm_tp2", save="/tmp/s", iters=3)
    value = dict(zip(argv, argv[1:]))
    assert value["--tensor-model-parallel-size"] == "2" and value["--global-batch-size"] == "2"  # mbs x dp 1
    assert value["--mm-model"] == "./m.json" and value["--mm-data"] == "./d.json" and "--bf16" in argv
    assert value["--load"] == "/w/mm_tp2" and value["--distributed-backend"] == "gloo" and value["--lr"] == CPU_LR
    assert changed["--lr"] == ("1.0e-5", CPU_LR) and changed["--train-iters"] == ("10000", "3")
    assert "--tensor-model-parallel-size" not in changed and "--mm-model" not in changed
    _, one = launch_flags(delivered, tp=1, ranks=1, load="/w/mm", save="/tmp/s")
    assert one["--tensor-model-parallel-size"] == ("2", "1")


def test_the_result_needs_the_converted_checkpoint_loaded_and_a_clean_exit():
    ok = launch_result(CpuLaunch(tp=2, ranks=2, returncode=0), LOG, timed_out=False, timeout=60, iters=3, load=LOAD)
    assert ok.ok and {"npu_rms_norm()", "npu_rotary_mul()"} <= set(ok.kernels) and ok.missing_kernel is None
    other = launch_result(CpuLaunch(returncode=0), LOG, timed_out=False, timeout=60, iters=3, load="/elsewhere")
    assert not other.ok and "does not say the converted checkpoint /elsewhere loaded" in other.problems[0]
    crashed = launch_result(CpuLaunch(returncode=1), LOG, timed_out=False, timeout=60, iters=3, load=LOAD)
    assert not crashed.ok and crashed.problems == ["torchrun exited 1"]
    cut = LOG[:LOG.index(" [2026-12-06 11:30:21] iteration        2/")]
    missing = cut + "\n[msmigrate megatron-cpu] no CPU reference for torch_npu.npu_swiglu\n"
    stopped = launch_result(CpuLaunch(returncode=1), missing, timed_out=False, timeout=60, iters=3, load=LOAD)
    assert not stopped.ok and stopped.missing_kernel == "torch_npu.npu_swiglu"


def test_the_launch_is_torchrun_of_the_entry_under_the_shim(tmp_path, monkeypatch):
    seen = {}

    def run(argv, **kw):
        seen.update(argv=argv, **kw)
        load = argv[argv.index("--load") + 1]
        return ProcessOutcome(argv, 0, LOG.replace(LOAD, load), "", 1.0, False)

    monkeypatch.setattr(cpu_launch_mod, "run_process", run)
    (tmp_path / "mm").mkdir()
    res = cpu_launch("/rt/bin/python", tmp_path, {"--micro-batch-size": "1", "--train-iters": "9"}, tp=2, ranks=2,
                     load=tmp_path / "mm")
    assert res.ok, res.problems
    argv = seen["argv"]
    assert argv[:3] == ["/rt/bin/python", "-m", "torch.distributed.run"] and "pretrain_vlm.py" in argv
    assert argv[argv.index("--nproc_per_node") + 1] == "2" and argv[argv.index("--train-iters") + 1] == "3"
    env = seen["env_extra"]
    assert env["PYTHONPATH"].split(":")[0].endswith("megatron_cpu/site") and env["PATH"].startswith("/rt/bin:")
    assert seen["cwd"] == tmp_path and res.load == str((tmp_path / "mm").resolve())
