"""The CPU references of the torch_npu kernels on the Megatron route (msmigrate/tools/megatron_cpu/npu_kernels.py),
each against its documented math written a second, independent way: RMSNorm by its formula in float64, SwiGLU by
silu(first half) * second half, rotary_mul by rotating each pair as a complex number, fusion attention by torch's
own scaled_dot_product_attention per layout / mask mode / packed sequence, and gradients by gradcheck."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from msmigrate.tools.megatron_cpu import npu_kernels as K


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_rms_norm_is_x_over_root_mean_square_times_gamma():
    x = torch.randn(3, 5, 8, generator=_gen())
    gamma = torch.randn(8, generator=_gen(1))
    y, rstd = K.npu_rms_norm(x, gamma, epsilon=1e-5)
    x64 = x.double()
    want = x64 / torch.sqrt((x64 ** 2).sum(-1, keepdim=True) / 8 + 1e-5) * gamma.double()
    torch.testing.assert_close(y.double(), want, rtol=1e-5, atol=1e-6)
    assert rstd.shape == (3, 5, 1)
    torch.testing.assert_close(rstd.double(), 1 / torch.sqrt((x64 ** 2).mean(-1, keepdim=True) + 1e-5),
                               rtol=1e-5, atol=1e-6)


def test_rms_norm_keeps_dtype_and_normalises_over_gamma_dims():
    x = torch.randn(2, 4, 6, generator=_gen()).to(torch.bfloat16)
    gamma = torch.ones(4, 6)
    y, rstd = K.npu_rms_norm(x, gamma)
    assert y.dtype == torch.bfloat16 and rstd.shape == (2, 1, 1)
    # unit gamma: every normalised slab has mean square ~1
    assert torch.allclose(y.float().pow(2).mean(dim=(1, 2)), torch.ones(2), atol=2e-2)


def test_swiglu_is_silu_of_the_first_half_times_the_second():
    x = torch.randn(4, 10, generator=_gen())
    a, b = x[:, :5], x[:, 5:]
    torch.testing.assert_close(K.npu_swiglu(x), a * torch.sigmoid(a) * b)
    x2 = torch.randn(6, 3, generator=_gen(2))
    torch.testing.assert_close(K.npu_swiglu(x2, dim=0), F.silu(x2[:3]) * x2[3:])


def test_rotary_mul_half_rotates_each_dim_pair_as_a_complex_number():
    seq, dim = 5, 8
    x = torch.randn(2, seq, 3, dim, generator=_gen())
    theta = torch.randn(seq, 1, dim // 2, generator=_gen(1))
    cos, sin = torch.cos(theta).repeat(1, 1, 2), torch.sin(theta).repeat(1, 1, 2)
    out = K.npu_rotary_mul(x, cos, sin)  # "half": pair (i, i + dim/2)
    z = torch.complex(x[..., : dim // 2].double(), x[..., dim // 2:].double()) * torch.polar(
        torch.ones_like(theta).double(), theta.double())
    torch.testing.assert_close(out.double(), torch.cat((z.real, z.imag), dim=-1), rtol=1e-5, atol=1e-6)


def test_rotary_mul_interleave_rotates_even_odd_pairs():
    x = torch.randn(3, 6, generator=_gen())
    theta = torch.randn(3, 3, generator=_gen(1))
    cos, sin = torch.cos(theta).repeat_interleave(2, -1), torch.sin(theta).repeat_interleave(2, -1)
    out = K.npu_rotary_mul(x, cos, sin, rotary_mode="interleave")
    z = torch.complex(x[:, 0::2].double(), x[:, 1::2].double()) * torch.polar(torch.ones_like(theta).double(),
                                                                            theta.double())
    torch.testing.assert_close(out.double(), torch.stack((z.real, z.imag), -1).flatten(-2), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError):
        K.npu_rotary_mul(x, cos, sin, rotary_mode="spiral")


def _sdpa(q, k, v, causal=False, mask=None, scale=None):
    """q [B, N, S, D], k/v [B, Nkv, S, D]; torch's attention, KV heads repeated for groups."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask, is_causal=causal,
                                          scale=scale)


@pytest.mark.parametrize("layout", ["BNSD", "BSND", "BSH", "SBH"])
@pytest.mark.parametrize("kv_heads", [4, 2])
def test_fusion_attention_layouts_equal_torch_attention(layout, kv_heads):
    b, n, s, d = 2, 4, 7, 8
    q = torch.randn(b, n, s, d, generator=_gen())
    k = torch.randn(b, kv_heads, s, d, generator=_gen(1))
    v = torch.randn(b, kv_heads, s, d, generator=_gen(2))
    to = {"BNSD": lambda t: t, "BSND": lambda t: t.transpose(1, 2),
          "BSH": lambda t: t.transpose(1, 2).flatten(2), "SBH": lambda t: t.permute(2, 0, 1, 3).flatten(2)}[layout]
    scale = d ** -0.5
    causal = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)
    out = K.npu_fusion_attention(to(q), to(k), to(v), n, layout, atten_mask=causal, scale=scale)[0]
    torch.testing.assert_close(out, to(_sdpa(q, k, v, causal=True, scale=scale)), rtol=1e-5, atol=1e-5)
    # sparse_mode 2/3 build the causal mask themselves (the NPU takes a compressed 2048x2048 one)
    for mode in (2, 3):
        out = K.npu_fusion_attention(to(q), to(k), to(v), n, layout, atten_mask=torch.ones(2048, 2048).bool(),
                                     scale=scale, sparse_mode=mode)[0]
        torch.testing.assert_close(out, to(_sdpa(q, k, v, causal=True, scale=scale)), rtol=1e-5, atol=1e-5)
    full = K.npu_fusion_attention(to(q), to(k), to(v), n, layout, scale=scale)[0]
    torch.testing.assert_close(full, to(_sdpa(q, k, v, scale=scale)), rtol=1e-5, atol=1e-5)


def test_fusion_attention_band_and_pse():
    b, n, s, d = 1, 2, 6, 4
    q, k, v = (torch.randn(b, n, s, d, generator=_gen(i)) for i in range(3))
    i, j = torch.arange(s)[:, None], torch.arange(s)[None, :]
    band = (j > i) | (j < i - 1)
    # sparse_mode 0 with a mask: the band [i - pre, i + next] is applied on top of it, whatever its shape
    for visible in (torch.zeros(s, s, dtype=torch.bool), torch.zeros(b, 1, s, s, dtype=torch.bool)):
        out = K.npu_fusion_attention(q, k, v, n, "BNSD", atten_mask=visible, scale=0.5, pre_tockens=1,
                                     next_tockens=0)[0]
        torch.testing.assert_close(out, _sdpa(q, k, v, mask=band, scale=0.5), rtol=1e-5, atol=1e-5)
    # without a mask nothing is masked and pre/next are ignored (the kernel's sparse-mode table): next_tockens=0,
    # MindSpeed's default, leaves a vision tower's full attention full
    for layout, to in (("BNSD", lambda t: t), ("SBH", lambda t: t.permute(2, 0, 1, 3).flatten(2))):
        out = K.npu_fusion_attention(to(q), to(k), to(v), n, layout, scale=0.5, pre_tockens=65536, next_tockens=0)[0]
        torch.testing.assert_close(out, to(_sdpa(q, k, v, scale=0.5)), rtol=1e-5, atol=1e-5)
    pse = torch.randn(b, n, s, s, generator=_gen(5))
    out = K.npu_fusion_attention(q, k, v, n, "BNSD", pse=pse, scale=0.5)[0]
    want = torch.softmax(q @ k.transpose(-1, -2) * 0.5 + pse, -1) @ v
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)


def test_fusion_attention_tnd_keeps_packed_sequences_apart():
    n, d, lens = 2, 4, [3, 5, 2]
    t = sum(lens)
    q, k, v = (torch.randn(t, n, d, generator=_gen(i)) for i in range(3))
    ends = torch.tensor(lens).cumsum(0).tolist()
    # mode 0 with next_tockens 0 and no mask (how the Qwen2.5 ViT's packed attention calls it): full attention
    for mode, causal in ((0, False), (3, True)):
        out = K.npu_fusion_attention(q, k, v, n, "TND", scale=0.5, actual_seq_qlen=ends, actual_seq_kvlen=ends,
                                     sparse_mode=mode, next_tockens=0)[0]
        start, parts = 0, []
        for end in ends:
            one = lambda x: x[start:end].transpose(0, 1)[None]  # noqa: E731
            parts.append(_sdpa(one(q), one(k), one(v), causal=causal, scale=0.5)[0].transpose(0, 1))
            start = end
        torch.testing.assert_close(out, torch.cat(parts), rtol=1e-5, atol=1e-5)


def test_fusion_attention_gradients_and_refusals():
    q, k, v = (torch.randn(1, 2, 3, 4, generator=_gen(i), dtype=torch.float64, requires_grad=True) for i in range(3))
    assert torch.autograd.gradcheck(
        lambda a, b, c: K.npu_fusion_attention(a, b, c, 2, "BNSD", scale=0.5, sparse_mode=2)[0], (q, k, v))
    x = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: K.npu_swiglu(t), (x,))
    with pytest.raises(NotImplementedError, match="dropout"):
        K.npu_fusion_attention(q, k, v, 2, "BNSD", keep_prob=0.9)
    with pytest.raises(ValueError, match="sparse_mode 5"):
        K.npu_fusion_attention(q, k, v, 2, "BNSD", sparse_mode=5)
