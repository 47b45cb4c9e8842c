"""The generated mm_plugin inside the REAL MindSpeed-MM ``BasePlugin`` (marker ``realmm``): the class the rules
policy writes is executed in the real ``mm_plugin.py`` module, in the real runtime (torch 2.7 + transformers 4.57),
on a source built for that runtime; its expansion must put exactly as many media tokens per image as the source's
processor does, and the real 8-argument ``get_mm_inputs`` must return the outputs the forward takes.

Needs the snapshot ($MSMIGRATE_REALMM_DIR or shared/realmm) and the runtime ($MSMIGRATE_REAL_RUNTIME, a venv built
by scripts/real_target.sh); skips, saying which is missing, otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from msmigrate.agent.routes.fsdp2.data_contract import derive_contract
from msmigrate.agent.data_branch_b import render_plugin, render_shared_plugin
from msmigrate.tools.media_expansion import derive_media_expansion

pytestmark = pytest.mark.realmm
REPO = Path(__file__).resolve().parents[2]
MM_PLUGIN = "MindSpeed-MM/mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py"

# Runs in the real runtime: the real module + the generated class, driven the way the real dataset and collator
# drive a plugin (process_messages per sample, get_mm_inputs with the 8 real arguments).
DRIVER = r'''
import importlib.util, json, sys
from transformers import AutoProcessor
mm_path, code_path, source, name, token = sys.argv[1:6]
spec = importlib.util.spec_from_file_location("real_mm_plugin", mm_path)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
exec(open(code_path).read(), mod.__dict__)
cls = mod.__dict__["GeneratedPlugin"]
mod.PLUGINS[name] = cls
plugin = mod.get_mm_plugin(name, image_token=token)
proc = AutoProcessor.from_pretrained(source)
samples = json.load(open(source + "/data/train.json"))[:2]
images = [source + "/data/" + s["images"][0] for s in samples]
texts, counts = [], []
for s, img in zip(samples, images):
    msgs = plugin.process_messages([dict(s["messages"][0])], [img], [], [], proc)
    ids = proc.tokenizer(msgs[0]["content"], add_special_tokens=False)["input_ids"]
    counts.append(ids.count(proc.tokenizer.convert_tokens_to_ids(token)))
    texts.append(ids)
out = plugin.get_mm_inputs(images, [], [], [1, 1], [0, 0], [0, 0], texts, proc)
print("RESULT " + json.dumps({"counts": counts, "keys": sorted(out), "base": [c.__name__ for c in cls.__mro__]}))
'''


def _snapshot() -> Path | None:
    env = os.environ.get("MSMIGRATE_REALMM_DIR")
    for cand in ([Path(env)] if env else [REPO.parent / "shared" / "realmm", REPO.parents[1] / "shared" / "realmm"]):
        if (cand / "MindSpeed-MM.tar.gz").is_file():
            return cand
    return None


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    snap, venv = _snapshot(), os.environ.get("MSMIGRATE_REAL_RUNTIME")
    if snap is None:
        pytest.skip("real MindSpeed-MM snapshot not found (set MSMIGRATE_REALMM_DIR)")
    python = Path(venv) / "bin" / "python" if venv else None
    if python is None or not python.is_file():
        pytest.skip("no real runtime (build one with scripts/real_target.sh, set MSMIGRATE_REAL_RUNTIME)")
    root = tmp_path_factory.mktemp("real_plugin")
    with tarfile.open(snap / "MindSpeed-MM.tar.gz") as tar:
        tar.extractall(root, members=[m for m in tar.getmembers() if m.name == MM_PLUGIN], filter="data")
    return root, str(python)


@pytest.mark.parametrize("family", ["llava_next", "paligemma"])  # per-image count + image_sizes; fixed + ids around
def test_generated_plugin_runs_in_the_real_base_plugin(real, family, tmp_path):
    from msmigrate.testbeds.fixtures.in_runtime import build_source_in_runtime

    root, python = real
    source = build_source_in_runtime(family, tmp_path / family, python)
    exp = derive_media_expansion(python, source, source / "data" / "train.json")
    assert exp.ok, exp.error
    forward = {"input_ids", "attention_mask", "labels", "pixel_values", "image_sizes", "token_type_ids"}
    contract = derive_contract(exp, forward)
    code = tmp_path / "plugin.py"
    code.write_text(render_shared_plugin() + render_plugin("GeneratedPlugin", family, exp, contract.mm_input_keys))
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    res = subprocess.run([python, str(driver), str(root / MM_PLUGIN), str(code), str(source), family,
                          exp.media_token], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, res.stderr[-3000:]
    out = json.loads(line[len("RESULT "):])
    assert "MMPluginMixin" in out["base"]  # the real framework's class, not the stand-in's
    assert out["counts"] == [p.count for p in exp.per_image[:2]]  # the processor's own count, per image
    # nothing measured on the samples is written into the code: the counts come from the processor at run time
    text = code.read_text()
    assert "fixed_expansion" not in text and not [k for k in exp.processor_kwargs if k in text]
    assert out["keys"] == sorted(contract.mm_input_keys)
