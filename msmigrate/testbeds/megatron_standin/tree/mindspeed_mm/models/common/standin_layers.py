"""The stand-in's one transformer layer, with Megatron's parameter names (fused ``linear_qkv`` ordered by KV group,
``linear_proj``, ``linear_fc1`` holding gate and up stacked, ``linear_fc2``). Plain softmax attention, no rotary
embedding: it is a contract stand-in, not the real numerics."""
import torch
import torch.nn.functional as F


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class SelfAttention(torch.nn.Module):
    def __init__(self, hidden, heads, groups, qkv_bias, proj_bias):
        super().__init__()
        self.heads, self.groups, self.head_dim = heads, groups, hidden // heads
        self.linear_qkv = torch.nn.Linear(hidden, (heads + 2 * groups) * self.head_dim, bias=qkv_bias)
        self.linear_proj = torch.nn.Linear(heads * self.head_dim, hidden, bias=proj_bias)

    def forward(self, x, causal):
        b, s, _ = x.shape
        per = self.heads // self.groups
        qkv = self.linear_qkv(x).view(b, s, self.groups, per + 2, self.head_dim)
        q, k, v = qkv[:, :, :, :per], qkv[:, :, :, per:per + 1], qkv[:, :, :, per + 1:]
        q = q.reshape(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = k.expand(-1, -1, -1, per, -1).reshape(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = v.expand(-1, -1, -1, per, -1).reshape(b, s, self.heads, self.head_dim).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.linear_proj(out.transpose(1, 2).reshape(b, s, -1))


class MLP(torch.nn.Module):
    def __init__(self, hidden, ffn, gated, bias):
        super().__init__()
        self.gated = gated
        self.linear_fc1 = torch.nn.Linear(hidden, ffn * (2 if gated else 1), bias=bias)
        self.linear_fc2 = torch.nn.Linear(ffn, hidden, bias=bias)

    def forward(self, x):
        h = self.linear_fc1(x)
        if self.gated:
            gate, up = h.chunk(2, dim=-1)
            h = F.silu(gate) * up
        else:
            h = F.gelu(h)
        return self.linear_fc2(h)


class TransformerLayer(torch.nn.Module):
    def __init__(self, cfg, spec):
        super().__init__()
        hidden, heads = cfg.hidden_size, cfg.num_attention_heads
        groups = getattr(cfg, "num_query_groups", None) if getattr(cfg, "group_query_attention", False) else None
        eps = getattr(cfg, "layernorm_epsilon", 1e-6)
        self.input_layernorm = RMSNorm(hidden, eps)
        self.self_attention = SelfAttention(hidden, heads, groups or heads, spec["qkv_bias"], spec["proj_bias"])
        self.pre_mlp_layernorm = RMSNorm(hidden, eps)
        self.mlp = MLP(hidden, cfg.ffn_hidden_size, getattr(cfg, "gated_linear_unit", False), spec["mlp_bias"])

    def forward(self, x, causal):
        x = x + self.self_attention(self.input_layernorm(x), causal)
        return x + self.mlp(self.pre_mlp_layernorm(x))


class TransformerBlock(torch.nn.Module):
    def __init__(self, cfg, spec, final_norm):
        super().__init__()
        self.layers = torch.nn.ModuleList(TransformerLayer(cfg, spec) for _ in range(cfg.num_layers))
        if final_norm:
            self.final_layernorm = RMSNorm(cfg.hidden_size, getattr(cfg, "layernorm_epsilon", 1e-6))

    def forward(self, x, causal):
        for layer in self.layers:
            x = layer(x, causal)
        return self.final_layernorm(x) if hasattr(self, "final_layernorm") else x
