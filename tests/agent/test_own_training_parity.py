"""G1 against the source's own training pipeline (the Phi-3.5-vision-layout fixture, whose fine-tuning script has
its own dataset + collator and trains through the model's own loss): the model-parity probe builds the batch with
that code and takes that loss path as the reference, so the comparison is never "not comparable" for lack of a
batch. A faithful plugin passes; one that skips part of the vision projector, or shifts the labels a second time,
fails with figures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from msmigrate.core.run_context import RunContext
from msmigrate.testbeds.fixtures import build_source
from msmigrate.testbeds.standin import write_standin
from msmigrate.tools.repo_reader.training_facts import source_training_facts
from msmigrate.tools.target_checks import model_parity

pytestmark = pytest.mark.integration

PLUGIN_DIR = "mindspeed_mm/fsdp/models/phi3_v"
FAITHFUL = '''import torch
from mindspeed_mm.fsdp.utils.register import model_register

from .modeling_phi3_v import Phi3VForCausalLM


@model_register.register("phi3_v")
class Phi3VPlugin(Phi3VForCausalLM):
    accepts_loss_kwargs = False
'''
NO_PROJECTOR_TAIL = FAITHFUL + '''

    def __init__(self, config):
        super().__init__(config)
        projector = self.model.vision_embed_tokens.img_projection
        # a port that skips the projector's GELU + second Linear (same parameters, another computation)
        projector.forward = lambda rows: projector[0](rows)
'''
SHIFT_TWICE = FAITHFUL + '''

    def forward(self, *args, labels=None, **kwargs):
        if labels is not None:  # a port that pre-shifts the labels although the forward's loss shifts them too
            labels = torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], -100)], dim=1)
        return super().forward(*args, labels=labels, **kwargs)
'''


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("own_parity")
    source = build_source("phi3_v", root / "phi3_v")
    target = write_standin(root / "MindSpeed-MM", git_init=False, with_assets=False)
    return root, source, target, source_training_facts(source)


def run_parity(setup, name: str, plugin: str) -> dict:
    root, source, target, facts = setup
    dest = root / f"t_{name}"
    shutil.copytree(target, dest, symlinks=True)
    pkg = dest / PLUGIN_DIR
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for module in ("modeling_phi3_v.py", "configuration_phi3_v.py"):  # the vendored remote code
        shutil.copy2(source / module, pkg / module)
    (pkg / "plugin.py").write_text(plugin)
    ctx = RunContext(run_id=f"own-{name}", run_dir=root / f"run_{name}", source=source, target=dest,
                     model_name="phi3_v", data_path=source / "data" / "train.json")
    res = model_parity(ctx, plugins=[PLUGIN_DIR], model_id="phi3_v", trust_remote_code=True,
                       sample_data=ctx.data_path, source_training=facts)
    assert res.ok, (res.error, res.data.get("stderr_tail", "")[-3000:])
    return res.data["result"]


def test_a_faithful_plugin_matches_the_sources_own_loss_path(setup):
    r = run_parity(setup, "faithful", FAITHFUL)
    assert r["passed"] is True, r["problems"]
    assert r["batch_source"].startswith("the source's own training pipeline (finetune/finetune_hf_trainer.py "
                                        "VqaDataset + Phi3VDataCollator)")
    assert "pixel_values" in r["batch_keys"] and "image_sizes" in r["batch_keys"]
    assert r["source_loss"] > 0 and r["eager"]["dloss"] <= 1e-5 and r["eager"]["max_abs_dlogit"] <= 1e-4


def test_a_plugin_skipping_the_vision_projector_fails(setup):
    r = run_parity(setup, "no_projector", NO_PROJECTOR_TAIL)
    assert r["passed"] is False
    assert any(p.startswith("eager: max |Δlogit|") for p in r["problems"]), r["problems"]


def test_a_plugin_shifting_the_labels_twice_fails(setup):
    r = run_parity(setup, "shift_twice", SHIFT_TWICE)
    assert r["passed"] is False
    assert r["eager"]["max_abs_dlogit"] <= 1e-4 and r["eager"]["dloss"] > 1e-5  # same logits, another loss
