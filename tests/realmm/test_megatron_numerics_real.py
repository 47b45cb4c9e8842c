"""The numerics check (activation, norm type, gated MLP, linear biases) on the real snapshot's example model JSONs
paired with tiny real-transformers sources of the same family: every field the real JSON sets agrees with what the
source's config and weights show, and the cross pairs (the other family's example) disagree on exactly the fields
where the two families differ."""

from __future__ import annotations

import json

import pytest

from msmigrate.testbeds.fixtures import build_source
from msmigrate.tools.megatron.encoder_structure import weight_shapes
from msmigrate.tools.megatron.numerics import numerics_problems, source_numerics

pytestmark = pytest.mark.realmm

# real example model JSONs launched by pretrain_vlm.py scripts -> the fixture of the same family
PAIRS = {"examples/qwen2.5vl/model_3b.json": "qwen2_5_vl", "examples/qwen2.5vl/model_7b.json": "qwen2_5_vl",
         "examples/qwen2.5vl/model_32b.json": "qwen2_5_vl", "examples/qwen2.5vl/model_72b.json": "qwen2_5_vl",
         "examples/mindspore/qwen3vl/model_8B.json": "qwen3_vl"}
ROLES = {"vision_encoder": ("image_encoder", "vision_encoder"), "text_decoder": ("text_decoder",)}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("numerics_src")
    return {name: build_source(name, root / name) for name in sorted(set(PAIRS.values()))}


def _problems(mm, rel, src):
    model = json.loads((mm / rel).read_text())
    cfg = json.loads((src / "config.json").read_text())
    shapes = weight_shapes(src)
    out, compared = [], 0
    for role, path in ROLES.items():
        section = model
        for key in path:
            section = section[key]
        sub = cfg["vision_config"] if role == "vision_encoder" else (cfg.get("text_config") or cfg)
        facts = source_numerics(sub, shapes, role)
        compared += len([k for k in facts if k in section])
        out += numerics_problems(role, section, facts)
    return out, compared


def test_real_examples_agree_with_their_family(realmm_snapshot, sources):
    mm = realmm_snapshot / "MindSpeed-MM"
    for rel, family in PAIRS.items():
        problems, compared = _problems(mm, rel, sources[family])
        assert problems == [], (rel, problems)
        assert compared >= 7, (rel, compared)  # 3 vision + 4-5 decoder fields really compared


def test_the_other_familys_example_is_caught(realmm_snapshot, sources):
    mm = realmm_snapshot / "MindSpeed-MM"
    problems, _ = _problems(mm, "examples/qwen2.5vl/model_7b.json", sources["qwen3_vl"])
    fields = sorted(p.split(" is ")[0] for p in problems)
    # Qwen3-VL's ViT: gelu_pytorch_tanh, LayerNorm, fc1/fc2; its decoder has no q/k/v bias
    assert fields == ["text_decoder.add_qkv_bias", "vision_encoder.activation_func",
                      "vision_encoder.gated_linear_unit", "vision_encoder.normalization"], problems
    problems, _ = _problems(mm, "examples/mindspore/qwen3vl/model_8B.json", sources["qwen2_5_vl"])
    assert "vision_encoder.normalization is 'LayerNorm', the source has 'RMSNorm'" in " ".join(problems)
