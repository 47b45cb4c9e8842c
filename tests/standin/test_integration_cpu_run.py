"""2-rank CPU runs of the stand-in through the CPU shim (and the vanilla trainer failing on CPU)."""
import math
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from msmigrate.testbeds.standin import write_standin

SHIM = Path(__file__).resolve().parents[2] / "msmigrate" / "tools" / "cpu_shim.py"
# Regexes from the contract reference §9.2 (tested there on a real line).
ITER_RE = re.compile(r"iteration\s+(\d+)/\s*(\d+) \| consumed samples:\s+(\d+) \| elapsed time per iteration \(ms\): "
                     r"([\d.]+) \| learning rate: (\S+) \| global batch size:\s+(\d+) \| loss: (\S+) \|")
GRAD_RE = re.compile(r"\| grad norm: (\S+) \|")
PREFIX_RE = re.compile(r"^\[Rank 0 \| Local Rank 0\] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO "
                       r"\[mindspeed_mm\.fsdp\.train\.train_engine:48\] =>  \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] "
                       r"iteration {4}\s*\d+/ {4}\s*\d+ \| ")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(root: Path, config: str, shim=True, timeout=240):
    env = {**os.environ, "NON_MEGATRON": "true", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root)}
    entry = [str(SHIM), "mindspeed_mm/fsdp/train/trainer.py"] if shim else ["mindspeed_mm/fsdp/train/trainer.py"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
           str(_free_port()), *entry, config]
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    return write_standin(tmp_path_factory.mktemp("run") / "MindSpeed-MM")


@pytest.mark.integration
def test_qwen3vl_example_trains_through_shim(fresh):
    res = _torchrun(fresh, "examples/qwen3vl/qwen3vl_config.yaml")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    lines = [line for line in res.stdout.splitlines() if ITER_RE.search(line)]
    assert len(lines) >= 5, out[-4000:]
    for n, line in enumerate(lines, start=1):
        assert PREFIX_RE.match(line), line
        it, total, consumed, _, lr, gbs, loss = ITER_RE.search(line).groups()
        assert (int(it), int(total), int(consumed), int(gbs)) == (n, 6, 2 * n, 2)
        assert float(lr) == pytest.approx(1e-4) and math.isfinite(float(loss)) and float(loss) > 0
        assert math.isfinite(float(GRAD_RE.search(line).group(1)))
    assert res.stdout.count("[Rank 0] (after 2 iterations) memory (MB) | allocated: ") == 1
    assert "finished" not in res.stdout.lower()
    assert "Successfully imported: mindspeed_mm.fsdp.models.qwen3vl" in res.stdout
    assert "Applying recompute to module: model.language_model.layers.1" in res.stdout


@pytest.mark.integration
def test_custom_model_save_and_resume(fresh, tmp_path):
    cfg = yaml.safe_load((fresh / "examples/tiny_custom_lm/tiny_custom_lm_config.yaml").read_text())
    ckpt = tmp_path / "ckpt"
    cfg["training"].update(train_iters=4, save=str(ckpt), save_interval=2)
    first = tmp_path / "first.yaml"
    first.write_text(yaml.safe_dump(cfg))
    res = _torchrun(fresh, str(first))
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    assert f"Saved checkpoint to {ckpt}/iter_0000002" in res.stdout
    assert res.stdout.count(f"Saved checkpoint to {ckpt}/iter_0000004") == 2  # final save repeats (real quirk)
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "4"
    assert (ckpt / "iter_0000004" / ".metadata").is_file() and list((ckpt / "iter_0000004").glob("*.distcp"))
    assert (ckpt / "iter_0000004" / "extra_state" / "extra_state_rank_1.pt").is_file()

    cfg["training"].update(train_iters=6, load=str(ckpt), save=None)
    second = tmp_path / "second.yaml"
    second.write_text(yaml.safe_dump(cfg))
    res = _torchrun(fresh, str(second))
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    assert f"Loaded checkpoint from {ckpt}/iter_0000004" in res.stdout
    its = [int(ITER_RE.search(line).group(1)) for line in res.stdout.splitlines() if ITER_RE.search(line)]
    assert its == [5, 6]


@pytest.mark.integration
def test_vanilla_trainer_fails_on_cpu(fresh):
    res = _torchrun(fresh, "examples/qwen3vl/qwen3vl_config.yaml", shim=False, timeout=120)
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert "torch.accelerator.set_device_index(local_rank)" in out
    assert "RuntimeError" in out and "iteration" not in res.stdout.replace("iterations", "")
