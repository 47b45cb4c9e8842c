"""msmigrate's CPU torch_npu (tools/megatron_cpu): loaded through the launch shim's sitecustomize in a fresh process
(it patches torch process-wide), it resolves `import torch_npu`, runs the kernels as the CPU references and says
which one it ran, names an NPU API it has no version of when that is called, and puts accelerator calls on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys

from msmigrate.tools.megatron.real_step import KERNEL_LINE, MISSING_LINE, SHIM_SITE

SCRIPT = r"""
import torch, torch_npu
import torch.distributed as dist
from torch_npu.contrib import transfer_to_npu  # noqa: F401
from torchair import register_fx_node_ge_converter
assert torch_npu.__version__.endswith("msmigrate.cpu")
x = torch.randn(2, 8)
y, _ = torch_npu.npu_rms_norm(x, torch.ones(8))
assert torch.allclose(y, x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), atol=1e-6)
assert torch.device("npu").type == "npu"
t = torch.zeros(3, device="cuda")
assert t.device.type == "cpu" and t.to("npu:0").device.type == "cpu"
assert t.type() == "torch.cuda.FloatTensor" and t.type(torch.float64).dtype == torch.float64
assert torch.cuda.is_available() and torch.cuda.current_device() == "cpu"
assert torch.float32 not in torch_npu.unsupported_dtype  # an empty placeholder, not an endless one
assert register_fx_node_ge_converter(object())(len) is len
torch.cuda.manual_seed(3); a = torch.rand(2)
torch.manual_seed(3); b = torch.rand(2)
assert torch.equal(a, b)
try:
    torch_npu.npu_grouped_matmul(x)
except NotImplementedError as exc:
    assert "npu_grouped_matmul" in str(exc)
else:
    raise AssertionError("a kernel without a reference ran")
print("STUB OK")
"""


def test_the_shim_loads_the_cpu_torch_npu_in_a_fresh_process():
    env = {**os.environ, "PYTHONPATH": str(SHIM_SITE)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 0 and "STUB OK" in proc.stdout, proc.stderr[-3000:]
    assert [m.group(1) for m in KERNEL_LINE.finditer(proc.stderr)] == ["npu_rms_norm"]
    assert MISSING_LINE.findall(proc.stderr) == ["torch_npu.npu_grouped_matmul"]


def test_the_shim_can_be_switched_off():
    env = {**os.environ, "PYTHONPATH": str(SHIM_SITE), "MSMIGRATE_MEGATRON_CPU_SHIM": "0"}
    proc = subprocess.run([sys.executable, "-c", "import torch_npu"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode != 0 and "No module named 'torch_npu'" in proc.stderr
