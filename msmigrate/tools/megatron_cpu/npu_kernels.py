"""CPU reference implementations of the ``torch_npu.npu_*`` kernels that MindSpeed's patches call on the Megatron
VLM path, written from each kernel's documented math in plain torch (no torch_npu, no msmigrate imports: this file
is loaded inside the target runtime by the launch shim, and by the product's unit tests under another torch).

They are references, not fast paths: every one computes in float32 (float64 stays float64) and returns the input's dtype, and autograd
differentiates through the plain ops, so a backward step needs no hand-written gradient.

- ``npu_rms_norm(x, gamma, epsilon)`` -> (y, rstd): rstd = 1/sqrt(mean(x^2 over gamma's trailing dims) + eps),
  y = x * rstd * gamma.
- ``npu_swiglu(x, dim=-1)``: x split in two halves along ``dim`` (a, b); silu(a) * b.
- ``npu_rotary_mul(x, r1, r2, rotary_mode="half")``: x * r1 + rotate(x) * r2, rotate = (-x2, x1) on the two
  halves ("half") or on each (even, odd) pair ("interleave").
- ``npu_fusion_attention(q, k, v, head_num, input_layout, ...)`` -> (out, softmax_max, softmax_sum, softmax_out,
  seed, offset, numels): softmax(scale * q k^T + pse, masked) v for the layouts BSH, SBH, BSND, BNSD and TND
  (packed variable-length sequences, ``actual_seq_qlen``/``actual_seq_kvlen`` the cumulative ends), grouped KV heads
  (q heads a multiple of kv heads), ``atten_mask`` True = not attended, ``sparse_mode`` 0 (the mask as given, plus
  the pre/next token band; no mask: nothing masked and the band ignored, as the kernel's sparse-mode table says —
  MindSpeed's --next-tockens defaults to 0, so the band matters only where a mask is passed), 1 (all of the mask), 2 (causal from the top left), 3 (causal from the bottom right);
  the modes that take a compressed 2048x2048 mask (2, 3) build their causal mask from the sizes instead. Dropout
  (keep_prob < 1) is refused: a reference must be deterministic, and the gates train with attention dropout 0.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

MAX_TOKENS = 2147483647  # torch_npu's default pre/next token band: no band


def _wide(t):
    """float32 for the half types (what the NPU kernels accumulate in), float64 kept as it is."""
    return t if t.dtype == torch.float64 else t.float()


def npu_rms_norm(x, gamma, epsilon=1e-6):
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    xf = _wide(x)
    rstd = torch.rsqrt(xf.pow(2).mean(dim=dims, keepdim=True) + epsilon)
    y = (xf * rstd * _wide(gamma)).to(x.dtype)
    return y, rstd


def npu_swiglu(x, dim=-1):
    a, b = _wide(x).chunk(2, dim=dim)
    return (F.silu(a) * b).to(x.dtype)


def _rotate(x, mode):
    if mode == "half":
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    if mode == "interleave":
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((-odd, even), dim=-1).flatten(-2)
    raise ValueError(f"npu_rotary_mul: rotary_mode {mode!r} (the reference knows 'half' and 'interleave')")


def npu_rotary_mul(x, r1, r2, rotary_mode="half"):
    xf = _wide(x)
    return (xf * _wide(r1) + _rotate(xf, rotary_mode) * _wide(r2)).to(x.dtype)


def _to_bnsd(t, layout, heads):
    """[B, N, S, D] from one of the fixed-shape layouts."""
    if layout == "BNSD":
        return t
    if layout == "BSND":
        return t.transpose(1, 2)
    if layout == "BSH":
        b, s, h = t.shape
        return t.view(b, s, heads, h // heads).transpose(1, 2)
    if layout == "SBH":
        s, b, h = t.shape
        return t.view(s, b, heads, h // heads).permute(1, 2, 0, 3)
    raise ValueError(f"npu_fusion_attention: input_layout {layout!r}")


def _from_bnsd(t, layout):
    if layout == "BNSD":
        return t
    if layout == "BSND":
        return t.transpose(1, 2)
    b, n, s, d = t.shape
    if layout == "BSH":
        return t.transpose(1, 2).reshape(b, s, n * d)
    return t.permute(2, 0, 1, 3).reshape(s, b, n * d)  # SBH


def _kv_heads(t, layout, q_heads, q):
    """KV head count: from the head dim shared with q (layouts with H fold heads and dim together)."""
    if layout in ("BSH", "SBH"):
        return t.shape[-1] // (q.shape[-1] // q_heads)
    return t.shape[1] if layout == "BNSD" else t.shape[2]


def _mask(sq, skv, atten_mask, sparse_mode, pre_tokens, next_tokens, device):
    """[.., Sq, Skv] bool, True = not attended."""
    i = torch.arange(sq, device=device)[:, None]
    j = torch.arange(skv, device=device)[None, :]
    if sparse_mode == 2:
        return j > i
    if sparse_mode == 3:
        return j > i + (skv - sq)
    if sparse_mode not in (0, 1):
        raise ValueError(f"npu_fusion_attention: sparse_mode {sparse_mode} has no CPU reference (0, 1, 2, 3 do)")
    masked = torch.zeros(sq, skv, dtype=torch.bool, device=device)
    if atten_mask is None:  # sparse_mode 0 without a mask: no masking, pre/next tokens ignored (documented)
        return masked
    masked = masked | atten_mask.to(torch.bool)
    if sparse_mode == 0:  # with a mask, the band too: keep pre_tokens before and next_tokens after the diagonal
        masked = masked | (j < i - pre_tokens) | (j > i + next_tokens)
    return masked


def _attend(q, k, v, scale, pse, masked):
    """q [B, N, Sq, D], k/v [B, Nkv, Skv, D] -> out, max, sum (float32 softmax)."""
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = torch.matmul(_wide(q), _wide(k).transpose(-1, -2)) * scale
    if pse is not None:
        scores = scores + _wide(pse)
    if masked is not None:
        scores = scores.masked_fill(masked, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True)
    safe_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    expo = torch.exp(scores - safe_max)
    row_sum = expo.sum(dim=-1, keepdim=True)
    probs = expo / torch.where(row_sum > 0, row_sum, torch.ones_like(row_sum))  # a fully masked row gives 0
    return torch.matmul(probs, _wide(v)).to(q.dtype), safe_max, row_sum


def npu_fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None,
                         scale=1.0, keep_prob=1.0, pre_tockens=MAX_TOKENS, next_tockens=MAX_TOKENS, inner_precise=0,
                         prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                         gen_mask_parallel=True, sync=False, **_ignored):
    if keep_prob < 1.0:
        raise NotImplementedError("npu_fusion_attention: attention dropout (keep_prob < 1) has no deterministic CPU "
                                  "reference")
    if padding_mask is not None or prefix is not None:
        raise NotImplementedError("npu_fusion_attention: padding_mask / prefix have no CPU reference")
    if input_layout == "TND":
        return _varlen_attention(query, key, value, head_num, pse, atten_mask, scale, pre_tockens, next_tockens,
                                 actual_seq_qlen, actual_seq_kvlen, sparse_mode)
    q = _to_bnsd(query, input_layout, head_num)
    kvh = _kv_heads(key, input_layout, head_num, query)
    k, v = _to_bnsd(key, input_layout, kvh), _to_bnsd(value, input_layout, kvh)
    mask = atten_mask
    if sparse_mode in (2, 3) or atten_mask is None or atten_mask.dim() == 2:
        mask = _mask(q.shape[2], k.shape[2], atten_mask if sparse_mode in (0, 1) else None, sparse_mode,
                     pre_tockens, next_tockens, q.device)
    elif sparse_mode == 0 and (pre_tockens < MAX_TOKENS or next_tockens < MAX_TOKENS):
        none = torch.zeros(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device)  # the band alone
        mask = mask.to(torch.bool) | _mask(q.shape[2], k.shape[2], none, 0, pre_tockens, next_tockens, q.device)
    out, row_max, row_sum = _attend(q, k, v, scale, pse, mask.to(torch.bool) if mask is not None else None)
    return _outputs(_from_bnsd(out, input_layout), row_max, row_sum)


def _outputs(out, row_max, row_sum):
    empty = torch.empty(0)
    return out, row_max, row_sum, empty, 0, 0, 0


def _varlen_attention(query, key, value, head_num, pse, atten_mask, scale, pre_tokens, next_tokens, qlen, kvlen,
                      sparse_mode):
    """TND: [T, N, D] with sequences packed along T; each sequence attends only to itself."""
    if qlen is None:
        raise ValueError("npu_fusion_attention: TND needs actual_seq_qlen")
    kvlen = qlen if kvlen is None else kvlen
    q_ends, kv_ends = [int(e) for e in qlen], [int(e) for e in kvlen]
    outs, maxes, sums = [], [], []
    q_start = kv_start = 0
    for q_end, kv_end in zip(q_ends, kv_ends):
        q = query[q_start:q_end].transpose(0, 1).unsqueeze(0)  # [1, N, s, D]
        k = key[kv_start:kv_end].transpose(0, 1).unsqueeze(0)
        v = value[kv_start:kv_end].transpose(0, 1).unsqueeze(0)
        given = None if atten_mask is None or sparse_mode in (2, 3) else atten_mask[..., :q.shape[2], :k.shape[2]]
        sub_mask = _mask(q.shape[2], k.shape[2], given, sparse_mode, pre_tokens, next_tokens, q.device)
        out, row_max, row_sum = _attend(q, k, v, scale, None if pse is None else pse, sub_mask)
        outs.append(out[0].transpose(0, 1))
        maxes.append(row_max[0].transpose(0, 1))
        sums.append(row_sum[0].transpose(0, 1))
        q_start, kv_start = q_end, kv_end
    return _outputs(torch.cat(outs, dim=0), torch.cat(maxes, dim=0), torch.cat(sums, dim=0))


REFERENCES = {
    "npu_rms_norm": npu_rms_norm,
    "npu_swiglu": npu_swiglu,
    "npu_rotary_mul": npu_rotary_mul,
    "npu_fusion_attention": npu_fusion_attention,
}

