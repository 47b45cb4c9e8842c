"""What a vision encoder builds, from both sides: a registered component's code (AST) and a source's weight shapes.
The synthetic trees and shapes below use names that say nothing about the family; the facts come from the calls
(Conv2d / Conv3d / Embedding / Parameter / an inv_freq buffer) and from the tensor shapes."""
from __future__ import annotations

from pathlib import Path

from msmigrate.tools.megatron.encoder_structure import (component_structure, encoder_structures, source_structure,
                                                        structure_diff)

REGISTRY = '''
from .towers import TowerA, TowerB
ENCODERS = {"enc_a": TowerA, "enc_b": TowerB}


class Vision:
    def __init__(self, config):
        self.encoder = ENCODERS[config.vision_encoder.model_id](config)
'''
TOWERS = '''
import torch
from torch import nn


class Rot(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", torch.ones(dim), persistent=False)


class Patches(nn.Module):
    def __init__(self, c, d):
        super().__init__()
        self.proj = nn.Conv3d(c, d, 2, 2)


class TowerA(nn.Module):  # pixels through a 2-D conv, a learned table, a learned token
    def __init__(self, config):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 2, 2)
        self.table = torch.nn.Embedding(5, 8)
        self.token = torch.nn.Parameter(torch.zeros(1, 1, 8))
        self.blocks = SomeExternalBlock(config)


class TowerB(nn.Module):  # temporal patches (via a class of its own), rotary, a downsampling conv after the blocks
    def __init__(self, config):
        super().__init__()
        self.patch = Patches(3, 8)
        self.rot = Rot(4)
        self.down = nn.Conv2d(8, 16, 2, 2)
'''


def tree(tmp_path: Path) -> Path:
    d = tmp_path / "mindspeed_mm" / "models" / "vision"
    d.mkdir(parents=True)
    (d / "model.py").write_text(REGISTRY)
    (d / "towers.py").write_text(TOWERS)
    return tmp_path


def test_component_side_reads_what_the_class_builds(tmp_path):
    s = encoder_structures(tree(tmp_path))
    a, b = s["enc_a"], s["enc_b"]
    assert a.facts() == {"patch_embed": "conv2d", "other_convs": [], "learned_position": True, "class_token": True}
    assert a.rotary is False and "towers.py" in a.evidence["learned_position"]
    # Patches is followed into (its Conv3d is the first conv built); the later Conv2d is an extra conv
    assert b.facts() == {"patch_embed": "conv3d", "other_convs": ["conv2d"], "learned_position": False,
                         "class_token": False}
    assert b.rotary is True
    assert component_structure(tmp_path, "Missing").error


CLIPLIKE = {"tower.emb.patch.weight": [8, 3, 4, 4], "tower.emb.cls": [8], "tower.emb.position_embedding.weight": [5, 8],
            "tower.layers.0.ln1.weight": [8], "tower.layers.0.ln1.bias": [8], "tower.layers.0.fc.weight": [8, 8],
            "lm.layers.0.q.weight": [8, 8]}
QWENLIKE = {"visual.patch_embed.proj.weight": [8, 3, 2, 4, 4], "visual.blocks.0.norm1.weight": [8],
            "visual.blocks.0.attn.qkv.weight": [24, 8], "visual.blocks.0.attn.qkv.bias": [24]}


def test_source_side_reads_the_weight_shapes():
    clip = source_structure({("vision_" + k if k.startswith("tower") else k): v for k, v in CLIPLIKE.items()})
    assert clip.facts() == {"patch_embed": "conv2d", "other_convs": [], "learned_position": True, "class_token": True}
    assert clip.norm == "layernorm" and "cls" in clip.evidence["class_token"]
    qwen = source_structure(QWENLIKE)
    assert qwen.facts() == {"patch_embed": "conv3d", "other_convs": [], "learned_position": False,
                            "class_token": False}
    assert qwen.norm == "rmsnorm"
    assert source_structure({"lm.layers.0.q.weight": [8, 8]}) is None  # no vision tower in the weights


def test_a_bare_parameter_away_from_the_patch_embedding_is_no_class_token():
    shapes = {"vision_tower.emb.patch.weight": [8, 3, 4, 4], "vision_tower.emb.position_embedding.weight": [4, 8],
              "vision_tower.head.probe": [1, 1, 8], "vision_tower.head.attention.in_proj_bias": [24]}
    s = source_structure(shapes)
    assert s.learned_position and not s.class_token  # a pooling head's query is not a class token


def test_diff_names_both_values(tmp_path):
    s = encoder_structures(tree(tmp_path))
    qwen = source_structure(QWENLIKE)
    assert structure_diff(qwen, s["enc_a"]) == ["patch_embed: source 'conv3d', component 'conv2d'",
                                                "learned_position: source False, component True",
                                                "class_token: source False, component True"]
    assert structure_diff(qwen, s["enc_b"]) == ["other_convs: source [], component ['conv2d']"]
