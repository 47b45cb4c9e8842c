"""What makes a conversion needed (probes/checkpoint_conversion.py, ``load_differences``): a parameter no checkpoint
key reaches by name, or a key whose tensor the load changed. An op that matches a key but leaves its tensor as it is
(transformers' ``Transpose(check_dims=True)`` of fused experts already in the model's shape: the sweep's green
qwen3_vl_moe) needs no conversion; a tied name is reached through its partner."""

from __future__ import annotations

import torch
from probe_import import import_probe
from safetensors.torch import save_file


def test_only_an_unreached_name_or_a_changed_tensor_needs_a_conversion(tmp_path):
    diff = import_probe("checkpoint_conversion").load_differences
    square, flat, emb = torch.arange(16.0).reshape(4, 4), torch.ones(3), torch.randn(5, 2)
    state = {"experts.gate_up_proj": square, "norm.weight": flat, "embed.weight": emb, "lm_head.weight": emb}
    path = str(tmp_path / "model.safetensors")
    save_file({"ckpt.gate_up_proj": square.clone(), "ckpt.norm": flat.clone(), "ckpt.embed": emb.clone()}, path)
    by_name = {"experts.gate_up_proj": "ckpt.gate_up_proj", "norm.weight": "ckpt.norm", "embed.weight": "ckpt.embed"}
    files = dict.fromkeys(by_name.values(), path)
    assert diff(state, files, by_name) == ([], [])  # as it is; the tied head reached through the embedding
    loaded = {**state, "experts.gate_up_proj": square.t().contiguous()}  # the load transposed it
    assert diff(loaded, files, by_name) == ([], ["experts.gate_up_proj"])
    assert diff({**state, "norm.weight": flat.to(torch.bfloat16)}, files, by_name) == ([], ["norm.weight"])
    merged = {k: v for k, v in by_name.items() if k != "experts.gate_up_proj"}  # a fused name no key holds
    assert diff(state, files, merged) == (["experts.gate_up_proj"], [])


def test_keys_are_what_the_renamings_map_onto_each_name(monkeypatch):
    """A family whose renamings rename a model name again (mistral_large4: a key-by-key loader turned the written
    ``layers.1.mlp.experts…`` into ``layers.1.mlp.mlp.experts…`` and left them unwritten) gets the name taken back
    through its renamings; a name they leave alone is its own key; a tied group is written once, under the name the
    source shipped; a name no key reaches is reported."""
    probe = import_probe("checkpoint_conversion")

    def forward(key):
        return key.replace(".experts.", ".mlp.experts.") if ".norm" not in key else key.replace("norm", "ln")

    monkeypatch.setattr(probe, "renaming", lambda model: (forward, lambda n: n.replace(".mlp.experts.", ".experts.")))
    emb = torch.zeros(2, 2)
    state = {"layers.1.mlp.experts.w": torch.ones(2), "embed.weight": emb, "lm_head.weight": emb,
             "layers.0.norm.weight": torch.ones(3)}
    keys, unreachable = probe.loader_keys(state, {"embed.weight": "ckpt.embed"}, model=None)
    assert keys == {"layers.1.experts.w": "layers.1.mlp.experts.w", "embed.weight": "embed.weight"}
    assert unreachable == ["layers.0.norm.weight"]  # renamed away, and nothing renames onto it


def test_chunks_of_one_storage_are_written_as_tensors_of_their_own(tmp_path):
    """A load that splits a fused q/k/v into chunks leaves views of one storage (the sweep's kimi_k25 and qianfan_ocr
    vision towers); the hub's sharded save refuses those, so each is written as a copy of its own, bit for bit."""
    from huggingface_hub import save_torch_state_dict
    from safetensors.torch import load_file

    standalone = import_probe("checkpoint_conversion").standalone
    fused = torch.randn(6, 4)
    q, k, v = fused.chunk(3)
    whole = torch.randn(3, 2)
    assert standalone(whole).untyped_storage().data_ptr() == whole.untyped_storage().data_ptr()  # no copy needed
    state = {"q_proj.weight": q, "k_proj.weight": k, "v_proj.weight": v, "norm.weight": whole}
    save_torch_state_dict({key: standalone(t) for key, t in state.items()}, tmp_path)
    written = load_file(tmp_path / "model.safetensors")
    assert set(written) == set(state) and all(torch.equal(written[key], t) for key, t in state.items())
