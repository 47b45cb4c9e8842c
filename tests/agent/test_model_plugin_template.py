"""The rules policy's model plugin (model_plugin.py.j2) after meta-device init + ``to_empty``: every buffer equals an
eager build's, non-persistent ones included (rotary ``inv_freq``, Gemma 3's ``embed_scale``, vision position ids),
for both meta builds (accelerate's init_empty_weights as ModelHub does, and torch.device("meta")). Here on the
project runtime (transformers 5.x) with the stand-in; tests/realmm/test_plugin_buffers_real.py runs the same check on
the real runtime (transformers 4.57, whose init_weights rebuilds none of them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from msmigrate.agent.routes.fsdp2.rules.model import plugin_files

CHECK = Path(__file__).with_name("plugin_buffers_check.py")
FAMILIES = {"qwen2_vl": "Qwen2VLForConditionalGeneration", "gemma3": "Gemma3ForConditionalGeneration"}


def write_plugin(target: Path, family: str) -> str:
    """Render the plugin into ``target`` the way the model phase does; returns its module name."""
    plan = {"model_id": f"{family}_probe", "plugin_dir": f"mindspeed_mm/fsdp/models/{family}_probe",
            "hf_class": FAMILIES[family]}
    for rel, text in plugin_files(plan, family).items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_text(text)
    return f"{plan['plugin_dir'].replace('/', '.')}.modeling_{plan['model_id']}"


def buffers_after_to_empty(python: str, target: Path, family: str, source: Path) -> dict:
    module = write_plugin(target, family)
    proc = subprocess.run([python, str(CHECK), str(target), module, FAMILIES[family], str(source)],
                          capture_output=True, text=True, timeout=600, cwd=target,
                          env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_all_rebuilt(result: dict, family: str) -> None:
    for build, buffers in result["builds"].items():
        assert buffers, (build, "the model has no buffers to check")
        assert set(buffers.values()) == {"equal"}, (result["transformers"], build, buffers)
    names = set(result["builds"]["meta_device"])
    assert any("inv_freq" in n for n in names)
    if family == "gemma3":
        assert any(n.endswith("embed_scale") for n in names)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_plugin_rebuilds_every_buffer_after_meta_init(tmp_path, family):
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.standin import write_standin

    target = Path(write_standin(tmp_path / "target", with_assets=False))
    source = build_source(family, tmp_path / "src")
    assert_all_rebuilt(buffers_after_to_empty(sys.executable, target, family, source), family)


def test_check_sees_a_buffer_nobody_rebuilds(tmp_path):
    """The check itself can fail: the template's to_empty cut off leaves the rotary buffers as filled memory."""
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.standin import write_standin

    target = Path(write_standin(tmp_path / "target", with_assets=False))
    source = build_source("qwen2_vl", tmp_path / "src")
    module = write_plugin(target, "qwen2_vl")
    path = target / (module.replace(".", "/") + ".py")
    text = path.read_text()
    path.write_text(text[:text.index("    def to_empty")])
    proc = subprocess.run([sys.executable, str(CHECK), str(target), module, FAMILIES["qwen2_vl"], str(source)],
                          capture_output=True, text=True, timeout=600, cwd=target,
                          env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    builds = json.loads(proc.stdout.strip().splitlines()[-1])["builds"]
    assert any(v == "differs" for n, v in builds["meta_device"].items() if "inv_freq" in n), builds
