"""The converter for a new vision encoder on the Megatron stand-in: a tiny CLIP-style tower (q/k/v, out_proj,
fc1/fc2, two LayerNorms per layer, pre/post norms) is mapped onto the class the migration registered, loaded
strictly, and comes back bit-identical; the fused QKV follows the block's per-group split; tensors without a place
are named; a class tensor nothing fills fails it."""
from __future__ import annotations

import json
import sys

import pytest

torch = pytest.importorskip("torch")
from safetensors.torch import save_file  # noqa: E402

from msmigrate.agent.routes.megatron.components import match_components  # noqa: E402
from msmigrate.agent.routes.megatron.new_component import design_encoder  # noqa: E402
from msmigrate.tools.megatron.encoder_converter import encoder_conversion  # noqa: E402
from msmigrate.tools.megatron.registry import registered_ids  # noqa: E402

W, FFN, LAYERS, P = 32, 64, 2, 7
VISION = {"hidden_size": W, "intermediate_size": FFN, "num_attention_heads": 2, "num_hidden_layers": LAYERS,
          "patch_size": P, "image_size": 28, "hidden_act": "quick_gelu", "layer_norm_eps": 1e-5}
CFG = {"model_type": "tower", "vision_config": VISION,
       "text_config": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4}}


def tower_tensors(prefix="vt.vision_model."):
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    out = {f"{prefix}embeddings.patch_embedding.weight": r(W, 3, P, P), f"{prefix}embeddings.class_embedding": r(W),
           f"{prefix}embeddings.position_embedding.weight": r(17, W), f"{prefix}pre_layrnorm.weight": r(W),
           f"{prefix}pre_layrnorm.bias": r(W), f"{prefix}post_layernorm.weight": r(W),
           f"{prefix}post_layernorm.bias": r(W), "lm.layers.0.self_attn.q_proj.weight": r(64, 64)}
    for i in range(LAYERS):
        L = f"{prefix}encoder.layers.{i}."
        for p in ("q_proj", "k_proj", "v_proj", "out_proj"):
            out[f"{L}self_attn.{p}.weight"], out[f"{L}self_attn.{p}.bias"] = r(W, W), r(W)
        out[f"{L}mlp.fc1.weight"], out[f"{L}mlp.fc1.bias"] = r(FFN, W), r(FFN)
        out[f"{L}mlp.fc2.weight"], out[f"{L}mlp.fc2.bias"] = r(W, FFN), r(W)
        for n in ("layer_norm1", "layer_norm2"):
            out[f"{L}{n}.weight"], out[f"{L}{n}.bias"] = r(W), r(W)
    return out


@pytest.fixture
def written(tmp_path):
    from msmigrate.testbeds.megatron_standin import write_megatron_standin

    standin = write_megatron_standin(tmp_path / "mm", git_init=False, with_assets=False)
    shapes = {k: list(v.shape) for k, v in tower_tensors().items()}
    m = match_components(CFG, standin, registered_ids(standin), shapes=shapes)["vision_encoder"]
    d = design_encoder(standin, m.to_dict(), VISION, shapes, "tower")
    assert d.error is None, d.error
    for rel, text in {d.module_path: d.code, **d.edits}.items():
        (standin / rel).write_text(text)
    return standin, d


def convert(standin, d, tensors, tmp_path):
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    save_file(tensors, str(src / "model.safetensors"))
    (reg_file, reg), (spec_file, specs) = (d.tables[k].split(":") for k in ("registry", "specs"))
    return encoder_conversion(sys.executable, standin, src, tmp_path / "out", registry_file=reg_file, registry=reg,
                              specs_file=spec_file, specs=specs, model_id=d.model_id, fields=d.json_fields)


def test_tower_maps_loads_strictly_and_round_trips(written, tmp_path):
    standin, d = written
    hf = tower_tensors()
    res = convert(standin, d, hf, tmp_path)
    assert res.ok, (res.error, res.problems, res.unfilled_megatron)
    assert res.facts["strict_load"] and not res.unfilled_megatron
    assert res.facts["round_trip_identical"] == res.facts["mapped_hf"]
    tower = [k for k in hf if k.startswith("vt.")]
    assert res.facts["hf_tower_tensors"] == len(tower)  # the LM tensor is not the tower's
    # every tower tensor is mapped or named: the stand-in block's norms are RMSNorm (no bias); the norms outside
    # the blocks (pre_layrnorm before them, post_layernorm after: this config reads the last layer) are carried
    assert res.facts["mapped_hf"] + len(res.unmapped_hf) == len(tower)
    assert set(res.unmapped_hf) == {k for k in tower if ".layers." in k and "norm" in k and k.endswith(".bias")}
    assert [(n["name"], n["place"]) for n in d.outside_norms] == [("post_layernorm", "post"), ("pre_layrnorm", "pre")]
    mapping = json.loads((tmp_path / "out" / "encoder_mapping.json").read_text())["mapping"]
    L = "vt.vision_model.encoder.layers.1."
    assert mapping["blocks.layers.1.self_attention.linear_qkv.weight"]["hf"] == [
        f"{L}self_attn.{p}_proj.weight" for p in "qkv"]
    assert mapping["blocks.layers.1.input_layernorm.weight"]["hf"] == [f"{L}layer_norm1.weight"]
    assert mapping["blocks.layers.1.pre_mlp_layernorm.weight"]["hf"] == [f"{L}layer_norm2.weight"]
    assert mapping["class_embedding"]["hf"] == ["vt.vision_model.embeddings.class_embedding"]


def test_fused_qkv_is_in_the_blocks_per_group_order(written, tmp_path):
    from msmigrate.tools.megatron.probes.megatron_encoder_converter import qkv_fuse, qkv_split

    q, k, v = (torch.randn(W, W) for _ in range(3))
    fused, hd, per = qkv_fuse(q, k, v, groups=2)  # 2 heads, one per group: [q0, k0, v0, q1, k1, v1]
    assert hd == 16 and per == 1
    assert torch.equal(fused[:16], q[:16]) and torch.equal(fused[16:32], k[:16]) and torch.equal(fused[48:64], q[16:])
    # the stand-in block reads it back the same way: view(groups, per + 2, head_dim)
    g = fused.view(2, 3, 16, W)
    assert torch.equal(g[1, 1], k[16:]) and torch.equal(g[1, 2], v[16:])
    assert all(torch.equal(a, b) for a, b in zip(qkv_split(fused, 2, hd, per), (q, k, v)))


def test_a_class_tensor_nothing_fills_fails(written, tmp_path):
    standin, d = written
    hf = {k: v for k, v in tower_tensors().items() if ".layers.1.mlp.fc2." not in k}
    res = convert(standin, d, hf, tmp_path)
    assert not res.ok
    assert "blocks.layers.1.mlp.linear_fc2.weight" in res.unfilled_megatron
    assert any("strict load" in p and "linear_fc2" in p for p in res.problems)
