"""Tiny text-model sources for the checkpoint-conversion tests, saved the way the open-world builder saves its
sources (``save_pretrained`` of transformers 5, which writes a family's checkpoint in its hub layout: Mixtral's
per-expert ``block_sparse_moe.experts.N.w1/w2/w3`` that ``from_pretrained`` merges into fused experts)."""

from __future__ import annotations

from pathlib import Path

SIZES = {"vocab_size": 64, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2,
         "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 64}


def tiny_mixtral(dest: Path) -> Path:
    """A Mixtral whose checkpoint transformers 5 converts at load (bf16: the dtype must survive the conversion)."""
    import torch
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    model = MixtralForCausalLM(MixtralConfig(num_local_experts=3, num_experts_per_tok=2, **SIZES)).to(torch.bfloat16)
    model.save_pretrained(dest)
    return dest


def tiny_llama(dest: Path) -> Path:
    """A Llama with tied embeddings: its checkpoint holds the module layout, key by key."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(tie_word_embeddings=True, **SIZES)).save_pretrained(dest)
    return dest


def checkpoint_tensors(folder: Path) -> dict:
    """Every tensor of a safetensors folder (one file or shards), by key."""
    from safetensors.torch import load_file

    out = {}
    for path in sorted(Path(folder).glob("*.safetensors")):
        out.update(load_file(str(path)))
    return out
