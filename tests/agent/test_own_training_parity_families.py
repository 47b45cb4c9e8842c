"""G1 against the source's own training pipeline for the two remote-code families added for issue 31: the
model-parity probe builds the batch with each family's own training code and takes its loss path as the
reference — Qwen-VL-Chat's finetune.py dataset (HF default collator) and the model's own loss (the model opens the
image its ids name); DeepSeek-VL2's finetune/ dataset + collator and its trainer's compute_loss (the loss computed
outside the model). A faithful plugin passes; one that skips part of the vision projection, or shifts the labels a
second time, fails with figures."""

from __future__ import annotations

import shutil

import pytest

from msmigrate.core.run_context import RunContext
from msmigrate.testbeds.fixtures import build_source
from msmigrate.testbeds.standin import write_standin
from msmigrate.tools.repo_reader.training_facts import source_training_facts
from msmigrate.tools.target_checks import model_parity

pytestmark = pytest.mark.integration

FAMILIES = {
    "qwen_vl_chat": dict(
        model_id="qwen", modules=("modeling_qwen.py", "configuration_qwen.py", "visual.py"),
        base="from .modeling_qwen import QWenLMHeadModel as Base",
        # skip the post-resampler norm: same parameters, another image feature
        no_projector="        self.transformer.visual.ln_post = torch.nn.Identity()\n",
        batch_keys={"input_ids", "labels", "attention_mask"}),
    "deepseek_vl_v2": dict(
        model_id="deepseek_vl_v2", modules=("modeling_deepseek_vl_v2.py", "configuration_deepseek_vl_v2.py"),
        base="from .modeling_deepseek_vl_v2 import DeepseekVLV2ForCausalLM as Base",
        # the projector's GELU + second Linear skipped
        no_projector="        layers = self.projector.layers\n"
                     "        self.projector.layers = torch.nn.Sequential(layers[0])\n",
        batch_keys={"input_ids", "labels", "attention_mask", "images", "images_seq_mask", "images_spatial_crop"}),
}


def plugin_text(name: str, mutation: str | None) -> str:
    fam = FAMILIES[name]
    text = f'''import torch
from mindspeed_mm.fsdp.utils.register import model_register

{fam["base"]}


@model_register.register("{fam["model_id"]}")
class Plugin(Base):
    accepts_loss_kwargs = False
'''
    if mutation == "no_projector":
        text += "\n    def __init__(self, config):\n        super().__init__(config)\n" + fam["no_projector"]
    elif mutation == "shift_twice":
        text += '''
    def forward(self, *args, labels=None, **kwargs):
        if labels is not None:  # a port that pre-shifts the labels although the loss shifts them too
            labels = torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], -100)], dim=1)
        return super().forward(*args, labels=labels, **kwargs)
'''
    return text


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    root = tmp_path_factory.mktemp("own_parity_families")
    return root, write_standin(root / "MindSpeed-MM", git_init=False, with_assets=False)


@pytest.fixture(scope="module")
def sources(target):
    root, _ = target
    return {name: build_source(name, root / name) for name in FAMILIES}


def run_parity(target, sources, name: str, mutation: str | None) -> dict:
    root, standin = target
    source = sources[name]
    tag = f"{name}_{mutation or 'faithful'}"
    dest = root / f"t_{tag}"
    shutil.copytree(standin, dest, symlinks=True)
    plugin_dir = f"mindspeed_mm/fsdp/models/{name}"
    pkg = dest / plugin_dir
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for module in FAMILIES[name]["modules"]:  # the vendored remote code
        shutil.copy2(source / module, pkg / module)
    (pkg / "plugin.py").write_text(plugin_text(name, mutation))
    ctx = RunContext(run_id=f"own-{tag}", run_dir=root / f"run_{tag}", source=source, target=dest,
                     model_name=name, data_path=source / "data" / "train.json")
    res = model_parity(ctx, plugins=[plugin_dir], model_id=FAMILIES[name]["model_id"], trust_remote_code=True,
                       sample_data=ctx.data_path, source_training=source_training_facts(source))
    assert res.ok, (res.error, res.data.get("stderr_tail", "")[-3000:])
    return res.data["result"]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_faithful_plugin_matches_the_sources_own_loss_path(target, sources, name):
    r = run_parity(target, sources, name, None)
    assert r["passed"] is True, r["problems"]
    assert r["batch_source"].startswith("the source's own training pipeline")
    assert set(r["batch_keys"]) == FAMILIES[name]["batch_keys"]
    assert r["source_loss"] > 0 and r["eager"]["dloss"] <= 1e-5 and r["eager"]["max_abs_dlogit"] <= 1e-4


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_plugin_skipping_part_of_the_vision_projection_fails(target, sources, name):
    r = run_parity(target, sources, name, "no_projector")
    assert r["passed"] is False
    assert any(p.startswith("eager: max |Δlogit|") for p in r["problems"]), r["problems"]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_plugin_shifting_the_labels_twice_fails(target, sources, name):
    r = run_parity(target, sources, name, "shift_twice")
    assert r["passed"] is False
    assert r["eager"]["max_abs_dlogit"] <= 1e-4 and r["eager"]["dloss"] > 1e-5  # same logits, another loss
