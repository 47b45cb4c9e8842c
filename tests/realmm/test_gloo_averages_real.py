"""In the real MindSpeed-MM's runtime (torch 2.7), FSDP2 over 2 gloo ranks reads 2× the one-process gradient of the
global batch unless the CPU patches make gloo average (``cpu_shim.gloo_averages``): the cause of the uniform 2×
gradients a real-MM G6 training parity once read (tests/standin/test_gloo_averages.py has the unit tests)."""

import subprocess
from pathlib import Path

import pytest

SHIM = Path(__file__).resolve().parents[2] / "msmigrate" / "tools" / "cpu_shim.py"

pytestmark = [pytest.mark.realmm, pytest.mark.integration]


FSDP_TWO_RANKS = """
import importlib.util, sys, torch, torch.distributed as dist
from torch.distributed.fsdp import fully_shard
dist.init_process_group("gloo")
if sys.argv[1] == "shim":
    spec = importlib.util.spec_from_file_location("shim", sys.argv[2]); shim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shim); shim.gloo_averages()
elif sys.argv[1] == "probe":  # the probes' own rank setup, as the 2-rank training parity runs it
    sys.path.insert(0, sys.argv[3]); from _single_rank import start_single_rank; start_single_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
x = torch.arange(8.0).view(2, 4)
model(x).pow(2).mean().backward()  # one process, the global batch: the reference
ref = model[0].weight.grad.clone()
model.zero_grad()
fully_shard(model[0]); fully_shard(model)
model(x[dist.get_rank():dist.get_rank() + 1]).pow(2).mean().backward()  # each rank its half
ratio = float(model[0].weight.grad.full_tensor().norm() / ref.norm())
if dist.get_rank() == 0:
    print("RATIO", round(ratio, 6))
"""


def test_fsdp2_on_two_gloo_ranks_reads_the_global_batch_mean_in_the_real_runtime(tmp_path, real_runtime):
    """In the real MindSpeed-MM's runtime (torch 2.7): without the patch FSDP2's gradient over 2 gloo ranks is 2× the
    one-process gradient of the global batch; with it, and through the probes' own rank setup, equal."""
    script = tmp_path / "fsdp2_two_ranks.py"
    script.write_text(FSDP_TWO_RANKS)
    ratios = {}
    for mode in ("plain", "shim", "probe"):
        res = subprocess.run([real_runtime, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                              str(script), mode, str(SHIM), str(SHIM.parent / "probes")], capture_output=True,
                             text=True, timeout=300, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
        assert res.returncode == 0, res.stderr[-2000:]
        ratios[mode] = float(res.stdout.split("RATIO", 1)[1].split()[0])
    # "probe": the runtime's torch is a CUDA build on a host without a GPU; its compile-time accelerator once made
    # the probes' rank setup skip the CPU patches, and the realmm G6 training parity read 2× in every group
    assert ratios == {"plain": 2.0, "shim": 1.0, "probe": 1.0}, ratios

