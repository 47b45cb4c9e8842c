"""G1 runs the target's own HF weight load, as the delivered config makes its trainer run it (G4's launch does it
before its first step), on the plugin class of a remote-code source (the Phi-3.5-vision-layout fixture, its
modeling code vendored into the plugin package).

- The vendored class without ``_checkpoint_conversion_mapping`` loads: the real MindSpeed-MM's
  ``fsdp/checkpoint/hf_utils.py`` leaves a key as it is when the class has no (or an empty) mapping, which a class
  deriving from transformers' base ``PreTrainedModel`` has on transformers 4.x. (The stand-in used to build the bare
  ``PreTrainedModel`` to look up renamings on transformers 5, which refuses sdpa: G4 failed there and would not have
  on the real target.)
- A plugin whose parameter names differ from the checkpoint's keys and that has no mapping fails at G1, naming the
  loader and the parameters it left unwritten; with the mapping it passes G1.
- With ``load_strict`` (a setting of the delivered config) the loader's own exception is G1's failure."""

from __future__ import annotations

import shutil

import pytest

from msmigrate.agent.routes.fsdp2.gates import gate_model
from msmigrate.core.run_context import RunContext
from msmigrate.testbeds.fixtures import build_source
from msmigrate.testbeds.standin import write_standin
from msmigrate.tools.target_checks import framework_load_check

pytestmark = pytest.mark.integration

PLUGIN_DIR = "mindspeed_mm/fsdp/models/phi3_v"
HEAD = '''import torch
from mindspeed_mm.fsdp.utils.register import model_register

from .modeling_phi3_v import Phi3VForCausalLM, Phi3VPreTrainedModel
'''
INIT = '''
    def init_weights(self):  # the separators: bare parameters of a sub-model the vendored _init_weights leaves out
        super().init_weights()
        with torch.no_grad():
            for name, param in self.named_parameters():
                if name.endswith(("glb_GN", "sub_GN")):
                    param.zero_()
'''
VENDORED = HEAD + '''

@model_register.register("phi3_v")
class Phi3VPlugin(Phi3VForCausalLM):
    accepts_loss_kwargs = False
''' + INIT
WRAPPED = HEAD + '''

@model_register.register("phi3_v")
class Phi3VPlugin(Phi3VPreTrainedModel):
    accepts_loss_kwargs = False
{mapping}
    def __init__(self, config):
        super().__init__(config)
        self.inner = Phi3VForCausalLM(config)  # the checkpoint's keys are the source class's: model.*, lm_head.*
        self.post_init()

    def forward(self, **batch):
        return self.inner(**batch)
''' + INIT
MAPPING = '''    _checkpoint_conversion_mapping = {"^model\\\\.": "inner.model.", "^lm_head": "inner.lm_head"}
'''


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("framework_load")
    source = build_source("phi3_v", root / "phi3_v")
    target = write_standin(root / "MindSpeed-MM", git_init=False, with_assets=False)
    return root, source, target


def with_plugin(setup, name: str, plugin: str) -> RunContext:
    root, source, target = setup
    dest = root / f"t_{name}"
    shutil.copytree(target, dest, symlinks=True)
    pkg = dest / PLUGIN_DIR
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for module in ("modeling_phi3_v.py", "configuration_phi3_v.py"):  # the vendored remote code
        shutil.copy2(source / module, pkg / module)
    (pkg / "plugin.py").write_text(plugin)
    return RunContext(run_id=f"load-{name}", run_dir=root / f"run_{name}", source=source, target=dest,
                      model_name="phi3_v", data_path=source / "data" / "train.json")


def load(ctx: RunContext, strict: bool = False):
    return framework_load_check(ctx, plugins=[PLUGIN_DIR], model_id="phi3_v", load=str(ctx.source),
                                load_strict=strict, trust_remote_code=True)


def test_the_vendored_class_without_a_mapping_loads_as_on_the_real_target(setup):
    res = load(with_plugin(setup, "vendored", VENDORED), strict=True)
    assert res.ok, (res.error, res.data.get("stderr_tail", "")[-2000:])
    r = res.data["result"]
    assert r["loader"] == "hf_utils.load_hf_checkpoint" and r["unfilled_count"] == 0 and r["parameters"] > 0


def test_unmapped_names_fail_with_the_unwritten_parameters_and_the_mapping_fixes_them(setup):
    res = load(with_plugin(setup, "wrapped", WRAPPED.format(mapping="")))
    assert not res.ok
    r = res.data["result"]
    assert r["unfilled_count"] == r["parameters"] > 0
    assert "left" in res.error and all(name.startswith("inner.") for name in r["unfilled"])
    strict = load(with_plugin(setup, "wrapped_strict", WRAPPED.format(mapping="")), strict=True)
    assert not strict.ok and "absent from the HF checkpoint (load_strict=True)" in strict.error
    assert "raised in mindspeed_mm/fsdp/checkpoint/hf_utils.py" in strict.error  # the loader's own error and place
    mapped = load(with_plugin(setup, "mapped", WRAPPED.format(mapping=MAPPING)), strict=True)
    assert mapped.ok, mapped.error
    assert mapped.data["result"]["unfilled_count"] == 0


def _gate(ctx: RunContext) -> dict:
    deps = type("Deps", (), {"ctx": ctx})()
    plan = {"plugin_dir": PLUGIN_DIR, "route": "custom", "model_id": "phi3_v",
            "config_path": "examples/phi3_v/phi3_v_config.yaml",  # not written yet: the example + the draft decide
            "similar_case": "examples/tiny_custom_lm/tiny_custom_lm_config.yaml"}
    return gate_model(deps, {"plan": plan})


def test_g1_fails_in_the_model_phase_on_the_loader_and_passes_with_the_mapping(setup):
    ctx = with_plugin(setup, "gate_wrapped", WRAPPED.format(mapping=""))
    failed = _gate(ctx)
    assert not failed["passed"]
    assert "the target's own HF weight load (hf_utils.load_hf_checkpoint, training.load" in failed["summary"]
    item = next(e for e in failed["evidence"] if e["label"] == "framework HF load")
    assert item["metrics"]["load"] == str(ctx.source) and item["metrics"]["load_strict"] is False
    assert item["metrics"]["unfilled_count"] > 0
    passed = _gate(with_plugin(setup, "gate_mapped", WRAPPED.format(mapping=MAPPING)))
    load_item = next(e for e in passed["evidence"] if e["label"] == "framework HF load")
    assert load_item["metrics"]["unfilled_count"] == 0 and load_item["exit_code"] == 0
    assert "forward smoke failed" not in passed["summary"] and "HF weight load" not in passed["summary"]
