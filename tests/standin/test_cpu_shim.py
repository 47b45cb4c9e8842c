"""The CPU shim is a standalone torchrun entry (no msmigrate imports) and patches exactly the §10.3 points."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

SHIM = Path(__file__).resolve().parents[2] / "msmigrate" / "tools" / "cpu_shim.py"


def test_shim_is_standalone():
    tree = ast.parse(SHIM.read_text())
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(m and m.startswith("msmigrate") for m in modules)
    assert 'if __name__ == "__main__":' in SHIM.read_text()


@pytest.mark.integration
def test_shim_patches_and_runs_target_as_main(tmp_path, port):
    trainer = tmp_path / "repo" / "mindspeed_mm" / "fsdp" / "train" / "trainer.py"
    trainer.parent.mkdir(parents=True)
    trainer.write_text(
        "import os, sys, torch, torch.distributed as dist\n"
        "if __name__ == '__main__':\n"
        "    torch.accelerator.set_device_index(0)\n"
        "    torch.cpu.manual_seed(1); torch.cpu.manual_seed_all(1); torch.cpu.empty_cache()\n"
        "    print('ARGV', sys.argv[1:], 'BACKEND', dist.get_backend(), 'WORLD', dist.get_world_size())\n"
        "    print('ROOT_ON_PATH', os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))) in sys.path)\n"
        "    print('NON_MEGATRON', os.environ.get('NON_MEGATRON'))\n")
    env_cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1", "--master_port", str(port),
               str(SHIM), str(trainer), "cfg.yaml"]
    res = subprocess.run(env_cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "ARGV ['cfg.yaml'] BACKEND gloo WORLD 1" in res.stdout
    assert "ROOT_ON_PATH True" in res.stdout and "NON_MEGATRON true" in res.stdout


@pytest.mark.integration
def test_single_shard_ddp_path_wraps_a_cpu_module(tmp_path, port):
    # the trainer's fully_shard_parallel_size == 1 path without meta init: DDP(model, device_ids=[torch.<device>]);
    # on the CPU that is torch.cpu, which DDP refuses for a CPU module (G4 failed there once G4 took the delivered
    # config's build path)
    trainer = tmp_path / "repo" / "mindspeed_mm" / "fsdp" / "train" / "trainer.py"
    trainer.parent.mkdir(parents=True)
    trainer.write_text(
        "import torch, torch.distributed as dist\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "if __name__ == '__main__':\n"
        "    model = DDP(torch.nn.Linear(2, 2), process_group=dist.group.WORLD, find_unused_parameters=True,\n"
        "                device_ids=[torch.cpu])\n"
        "    model(torch.ones(1, 2)).sum().backward()\n"
        "    print('DDP_OK', model.device_ids)\n")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1", "--master_port", str(port),
           str(SHIM), str(trainer), "cfg.yaml"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "DDP_OK None" in res.stdout


# ---------------------------------------------------------------------------- storage that nothing initialised
# A toy model with what meta-device init + to_empty leaves behind when nothing rebuilds it: a non-persistent
# rotary-style buffer, an integer position-id buffer, and a parameter.
TOY_MODEL = '''
import torch


class Toy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 4, 2).float() / 4)), persistent=False)
        self.register_buffer("position_ids", torch.arange(4), persistent=False)

    def forward(self, x):
        angle = self.position_ids[: x.shape[-1]].float()[:, None] * self.inv_freq[None, :]
        return (self.proj(x) * angle.cos().sum()).sum()
'''


def _shim_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("cpu_shim_under_test", SHIM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_toy(python: str, tmp_path: Path, meta_buffers: bool) -> list[str]:
    """In a fresh interpreter (torch's deterministic flags are process-wide): deterministic storage, a meta build,
    to_empty, the parameter restored like a checkpoint load would, the buffers not; forward once."""
    (tmp_path / "toy.py").write_text(TOY_MODEL)
    script = (
        "import importlib.util, sys, torch\n"
        f"spec = importlib.util.spec_from_file_location('shim', {str(SHIM)!r})\n"
        "shim = importlib.util.module_from_spec(spec); spec.loader.exec_module(shim)\n"
        "shim.deterministic_storage(); shim.watch_first_forward(sys.stdout)\n"
        f"sys.path.insert(0, {str(tmp_path)!r}); from toy import Toy\n"
        "torch.manual_seed(0); ref = Toy()\n"
        f"with torch.device('meta') if {meta_buffers} else __import__('accelerate').init_empty_weights():\n"
        "    model = Toy()\n"
        "model.to_empty(device='cpu')\n"
        "model.load_state_dict(ref.state_dict())  # persistent state only, as training.load restores it\n"
        "print('LOSS', float(model(torch.ones(2, 4))))\n"
        "print('BUFFERS', model.inv_freq.isnan().all().item(), int(model.position_ids[0]))\n")
    res = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=300)
    assert res.returncode != 0 or "LOSS" in res.stdout, res.stderr[-3000:]
    return (res.stdout + res.stderr).splitlines()


def _check_toy(lines: list[str]) -> None:
    marks = [line for line in lines if "uninitialised storage at the first forward:" in line]
    assert len(marks) == 1, lines  # once: the watch stops after the model's first forward
    assert "non-persistent buffer `inv_freq` of Toy" in marks[0] and "NaN in 2 of 2 elements" in marks[0]
    assert "non-persistent buffer `position_ids`" in marks[0]  # the int64 buffer holds the largest int64
    assert "`proj.weight`" not in marks[0]  # the loaded parameter is fine


@pytest.mark.parametrize("meta_buffers", [True, False], ids=["torch.device(meta)", "Module.to_empty"])
def test_uninitialised_buffer_is_nan_every_time_and_named(tmp_path, meta_buffers):
    # Module.to_empty gives buffers new storage too (a trainer that calls it); without the fill it held
    # whatever the allocator returned (zeros on fresh pages: a finite loss, so the gate passed by luck)
    lines = _run_toy(sys.executable, tmp_path, meta_buffers)
    _check_toy(lines)
    assert "LOSS nan" in lines and "BUFFERS True 9223372036854775807" in lines, lines


@pytest.mark.realmm
def test_uninitialised_storage_fill_on_the_real_runtime(tmp_path):
    """torch 2.7.1 (the real MindSpeed-MM's runtime) has the same switch and fill values."""
    import os

    runtime = os.environ.get("MSMIGRATE_REAL_RUNTIME")
    python = Path(runtime or "/nonexistent") / "bin" / "python"
    if not python.is_file():
        pytest.skip("MSMIGRATE_REAL_RUNTIME not set to a built real runtime")
    lines = _run_toy(str(python), tmp_path, meta_buffers=True)
    _check_toy(lines)
    assert "LOSS nan" in lines, lines


def test_scan_names_parameters_and_persistent_buffers_and_ignores_legitimate_values():
    import torch

    shim = _shim_module()
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Embedding(3, 2))
    model[1].register_buffer("mask", torch.full((2,), float("-inf")))  # a legitimate -inf mask: not a fill
    model[1].register_buffer("big", torch.tensor([1, torch.iinfo(torch.int64).max]))  # not every element
    assert shim.uninitialised_tensors(model) == []
    with torch.no_grad():
        model[0].weight[0, 0] = float("nan")
    model[1].register_buffer("steps", torch.full((3,), torch.iinfo(torch.int32).max, dtype=torch.int32))
    found = shim.uninitialised_tensors(model)
    assert [(kind, name) for kind, name, _ in found] == [("parameter", "0.weight"), ("buffer", "1.steps")]
    line = shim.uninitialised_line(model, found)
    assert line.startswith(shim.UNINITIALISED_MARK + " parameter `0.weight` of Sequential") and "1 of 4" in line
    assert "also 1 more: buffer `1.steps`" in line
