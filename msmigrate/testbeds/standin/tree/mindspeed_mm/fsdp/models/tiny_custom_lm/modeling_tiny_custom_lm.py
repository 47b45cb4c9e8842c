"""A tiny custom decoder LM (custom path): torch.nn.Module + BaseModel + WeightInitMixin, built from ModelArguments."""
import os
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

from mindspeed_mm.fsdp.models.base_model import BaseModel, WeightInitMixin
from mindspeed_mm.fsdp.utils.register import model_register


@dataclass
class CausalLMOutput:
    loss: Optional[torch.Tensor]
    logits: torch.Tensor


class DecoderLayer(torch.nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(hidden)
        self.attn = torch.nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.norm2 = torch.nn.LayerNorm(hidden)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(hidden, 4 * hidden), torch.nn.GELU(),
                                       torch.nn.Linear(4 * hidden, hidden))

    def forward(self, hidden_states, attn_mask=None, **kwargs):  # **kwargs: recompute injects past_key_values
        x = self.norm1(hidden_states)
        hidden_states = hidden_states + self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0]
        return hidden_states + self.mlp(self.norm2(hidden_states))


@model_register.register("tiny_custom_lm")
class TinyCustomLM(torch.nn.Module, BaseModel, WeightInitMixin):
    def __init__(self, vocab_size=256, hidden_size=64, num_layers=2, num_heads=4):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(vocab_size, hidden_size)
        self.layers = torch.nn.ModuleList(DecoderLayer(hidden_size, num_heads) for _ in range(num_layers))
        self.norm = torch.nn.LayerNorm(hidden_size)
        self.lm_head = torch.nn.Linear(hidden_size, vocab_size, bias=False)

    @classmethod
    def _from_config(cls, config):
        # Extra YAML keys under `model:` (vocab_size, hidden_size, ...) arrive on the ModelArguments object.
        return cls(vocab_size=getattr(config, "vocab_size", 256), hidden_size=getattr(config, "hidden_size", 64),
                   num_layers=getattr(config, "num_layers", 2), num_heads=getattr(config, "num_heads", 4))

    @classmethod
    def from_pretrained(cls, config):
        model = cls._from_config(config)
        weights = os.path.join(config.model_name_or_path or "", "model.pt")
        if os.path.isfile(weights):
            model.load_state_dict(torch.load(weights, map_location="cpu"))
        else:
            model.init_weights()
        return model

    def forward(self, input_ids, attention_mask=None, labels=None, **kwargs):
        seq = input_ids.shape[1]
        causal = torch.triu(torch.full((seq, seq), float("-inf"), device=input_ids.device), diagonal=1)
        hidden = self.embed_tokens(input_ids)
        for layer in self.layers:
            hidden = layer(hidden, attn_mask=causal)
        logits = self.lm_head(self.norm(hidden)).float()
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                                   ignore_index=-100)
        return CausalLMOutput(loss=loss, logits=logits)
