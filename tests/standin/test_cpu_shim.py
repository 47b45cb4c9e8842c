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
