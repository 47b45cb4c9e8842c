"""A new vision projector written the framework's way when no registered class builds the source's: the class
from the source projector's parts (read back by the same AST reader), its registry entry (lines added only, on top
of a new encoder's edit of the same file), its converter (strict load + bit-identical round trip in the runtime)
and one forward behind the encoder whose width must be the text decoder's."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from msmigrate.agent.routes.megatron.new_projector import design_projector
from msmigrate.tools.megatron.projector_converter import projector_conversion
from msmigrate.tools.megatron.projector_forward import projector_forward
from msmigrate.tools.megatron.projector_structure import (projector_from_code, projector_structures,
                                                          source_projector)

V, H, VOCAB = 32, 64, 512
CFG = {"vision_config": {"image_size": 28, "patch_size": 7, "layer_norm_eps": 1e-6}}


def shapes(bridge: dict[str, list[int]]) -> dict[str, list[int]]:
    out = {"vt.patch.weight": [V, 3, 7, 7], "lm.embed.weight": [VOCAB, H], "lm.norm.weight": [H]}
    for i in range(2):
        out |= {f"vt.layers.{i}.qkv.weight": [3 * V, V], f"lm.layers.{i}.o.weight": [H, H]}
    return out | bridge


POOLED = shapes({"bridge.soft_norm.weight": [V], "bridge.proj_matrix": [V, H]})  # norm + a bare [in, out] matrix
TWO = shapes({"bridge.a.weight": [H, V], "bridge.a.bias": [H], "bridge.b.weight": [H, H], "bridge.b.bias": [H]})


@pytest.fixture
def standin_copy(tmp_path):
    from msmigrate.testbeds.megatron_standin import write_megatron_standin

    return write_megatron_standin(tmp_path / "mm", git_init=False, with_assets=False)


megatron_standin = standin_copy  # the tests that only read it


def match(sh, tokens=None, patches=None):
    return {"structure": source_projector(sh, H, V, "vt.patch.weight", VOCAB, tokens, patches).to_dict()}


def test_design_builds_what_the_weights_show_and_registers_by_adding_lines(megatron_standin):
    d = design_projector(megatron_standin, match(POOLED, 4, 16), CFG, "toy", H)
    assert d.error is None and d.model_id == "toy_projector" and d.root == "bridge"
    back = projector_from_code(d.code, d.class_name, d.model_id)
    assert back.facts() == {"matrices": 1, "norms": 1, "width_change": False, "pooling": True}
    assert d.json_fields["pool"] == 4 and d.json_fields["hidden_size"] == H
    assert d.layout["linear_fc1.weight"] == {"hf": "bridge.proj_matrix", "op": "transpose"}
    (reg_file, text), = d.edits.items()
    before = (megatron_standin / reg_file).read_text()
    assert set(before.splitlines()) - set(text.splitlines()) <= {"}"} and '"toy_projector": ToyProjector' in text
    # on top of a new encoder's edit of the same registry file: both entries survive
    both = design_projector(megatron_standin, match(POOLED, 4, 16), CFG, "toy", H,
                            {reg_file: before.replace("VISION_ENCODER_MAPPINGS = {", "VISION_ENCODER_MAPPINGS = {\n"
                                                      '    "enc_x": object,')})
    assert '"enc_x": object' in both.edits[reg_file] and '"toy_projector"' in both.edits[reg_file]


def test_design_refuses_what_it_cannot_write(megatron_standin):
    gated = shapes({"bridge.gate.weight": [2 * H, V], "bridge.up.weight": [2 * H, V], "bridge.down.weight": [H, 2 * H]})
    assert "one chain" in design_projector(megatron_standin, match(gated), CFG, "toy", H).error
    assert "text decoder takes" in design_projector(megatron_standin, match(TWO), CFG, "toy", 2 * H).error


@pytest.fixture
def registered(standin_copy, tmp_path):
    """The stand-in with the toy projector written and registered, and a source folder with its tensors."""
    import torch
    from safetensors.torch import save_file

    d = design_projector(standin_copy, match(POOLED, 4, 16), CFG, "toy", H)
    (standin_copy / d.module_path).write_text(d.code)
    for rel, text in d.edits.items():
        (standin_copy / rel).write_text(text)
    src = tmp_path / "src"
    src.mkdir()
    torch.manual_seed(0)
    save_file({n: torch.randn(*s) for n, s in POOLED.items()}, str(src / "model.safetensors"))
    return standin_copy, d, src


def convert(target, d, src, tmp_path, layout=None):
    reg_file, reg = d.tables["registry"].split(":")
    return projector_conversion(sys.executable, target, src, tmp_path / "conv", registry_file=reg_file, registry=reg,
                                model_id=d.model_id, fields=d.json_fields, layout=layout or d.layout, root=d.root)


def test_converter_loads_strictly_and_round_trips(registered, tmp_path):
    target, d, src = registered
    res = convert(target, d, src, tmp_path)
    assert res.ok, (res.error, res.problems)
    assert res.facts["strict_load"] and res.facts["round_trip_identical"] == 2 and res.unmapped_hf == []
    assert json.loads(Path(res.facts["mapping_file"]).read_text())["layout"] == d.layout
    # a layout that leaves a class tensor unfilled fails, and names it
    short = {k: v for k, v in d.layout.items() if k != "norm.weight"}
    bad = convert(target, d, src, tmp_path, short)
    assert not bad.ok and bad.unfilled_megatron == ["norm.weight"]
    assert "bridge.soft_norm.weight" in bad.unmapped_hf


TOY_ENCODER = """import torch


class ToyEnc(torch.nn.Module):
    def __init__(self, config, transformer_layer_spec, *args, **kwargs):
        super().__init__()
        self.conv = torch.nn.Conv2d(config.in_channels, config.hidden_size, config.patch_size, config.patch_size)

    def forward(self, pixel_values, *args, **kwargs):
        return self.conv(pixel_values).flatten(2).transpose(1, 2).reshape(-1, self.conv.out_channels)
"""


def test_forward_behind_the_encoder_checks_the_text_width(registered):
    """images -> an encoder built by model_id -> the new projector: 2 images x 16 patches pooled by 4 = 8 rows of
    the text width; a class that gives another width fails the check."""
    target, d, _ = registered
    reg_file, reg = d.tables["registry"].split(":")
    vm = target / "mindspeed_mm/models/vision/vision_model.py"
    (target / "mindspeed_mm/models/vision/toy_enc.py").write_text(TOY_ENCODER)
    vm.write_text("from mindspeed_mm.models.vision.toy_enc import ToyEnc\n" + vm.read_text().replace(
        "VISION_ENCODER_MAPPINGS = {", 'VISION_ENCODER_MAPPINGS = {\n    "toy_enc": ToyEnc,'))
    specs = target / "mindspeed_mm/models/common/module_spec/get_layer_spec.py"
    specs.write_text(specs.read_text() + "\nvit_layer_specs['toy_enc'] = get_qwen2vl_layer_spec\n")
    enc = {"tables": {"registry": f"{reg_file}:VISION_ENCODER_MAPPINGS",
                      "specs": "mindspeed_mm/models/common/module_spec/get_layer_spec.py:vit_layer_specs"},
           "model_id": "toy_enc", "json_fields": {"num_positions": 16, "patch_size": 7, "in_channels": 3,
                                                   "hidden_size": V}}

    def run():
        return projector_forward(sys.executable, target, registry_file=reg_file, registry=reg, model_id=d.model_id,
                                 fields=d.json_fields, encoder=enc, text_hidden=H)
    res = run()
    assert res.ok, (res.error, res.problems)
    assert res.facts["encoder_output_shape"] == [32, V] and res.facts["output_shape"] == [8, H]
    module = target / d.module_path
    module.write_text(module.read_text().replace("config.hidden_size, bias", "config.hidden_size + 1, bias"))
    bad = run()
    assert not bad.ok and any("want [8, 64]" in p for p in bad.problems)
