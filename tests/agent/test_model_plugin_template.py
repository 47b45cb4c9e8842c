"""The rules policy's model plugin (model_plugin.py.j2) after the trainer's meta-device path (ModelHub's
init_empty_weights build, the target's ``to_empty_if_needed``): every buffer equals an eager build's, non-persistent
ones included (rotary ``inv_freq``, Gemma 3's ``embed_scale``, vision position ids), with no ``to_empty`` override in
the plugin. Here on the project runtime (transformers 5.x) with the stand-in; tests/realmm/test_plugin_buffers_real.py
runs the same check on the real runtime (transformers 4.57, whose init_weights rebuilds none of them)."""

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


def buffers_after_to_empty(python: str, target: Path, family: str, source: Path, mode: str = "framework") -> dict:
    module = write_plugin(target, family)
    proc = subprocess.run([python, str(CHECK), str(target), module, FAMILIES[family], str(source), mode],
                          capture_output=True, text=True, timeout=600, cwd=target,
                          env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_all_rebuilt(result: dict, family: str) -> None:
    for build, buffers in result["builds"].items():
        assert buffers, (build, "the model has no buffers to check")
        assert set(buffers.values()) == {"equal"}, (result["transformers"], build, buffers)
    names = set(next(iter(result["builds"].values())))
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
    """The check itself can fail: a plain ``Module.to_empty`` (which the framework never calls) empties the rotary
    buffers too, and the plugin has no override that would put them back."""
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.standin import write_standin

    target = Path(write_standin(tmp_path / "target", with_assets=False))
    source = build_source("qwen2_vl", tmp_path / "src")
    builds = buffers_after_to_empty(sys.executable, target, "qwen2_vl", source, mode="plain_to_empty")["builds"]
    assert any(v == "differs" for n, v in builds["plain_to_empty"].items() if "inv_freq" in n), builds


def test_generated_code_is_clean_under_the_frameworks_formatter():
    """MindSpeed-MM's lint extra is black (default settings): every generated file and block passes it unchanged."""
    import black

    from msmigrate.agent.data_branch_b import render_shared_plugin

    files = plugin_files({"model_id": "fam", "plugin_dir": "mindspeed_mm/fsdp/models/fam",
                          "hf_class": "Qwen2VLForConditionalGeneration"}, "fam")
    for text in [*files.values(), render_shared_plugin().lstrip("\n")]:
        assert black.format_str(text, mode=black.Mode()) == text


def test_plugin_has_no_dead_override_and_no_tool_talk():
    text = plugin_files({"model_id": "fam", "plugin_dir": "mindspeed_mm/fsdp/models/fam",
                         "hf_class": "Qwen2VLForConditionalGeneration"}, "fam")["mindspeed_mm/fsdp/models/fam/modeling_fam.py"]
    assert "def to_empty" not in text and "msmigrate" not in text.lower() and "stand-in" not in text
