"""Probe (Megatron route, model phase): HF -> Megatron -> HF weight layout round trip on a tiny random decoder.

    python megatron_qkv_roundtrip.py [--config <config.json>] [--layers 2] [--head-dim 8] [--seed 0] [--tp 1]

Torch only, CPU; imports nothing from msmigrate. Head counts come from the source's config.json (its language
model part) when given, else a small grouped-query default; the widths are shrunk so the tensors stay tiny.

Layout (as read from MindSpeed-MM's checkpoint/vlm_model operators, written here in our own words): Megatron keeps
the attention input projection as ONE matrix, ordered by key/value group: for group g it holds the query rows of
every head that shares KV head g, then group g's key rows, then its value rows, then the next group. HF keeps
q_proj / k_proj / v_proj apart, heads in order. The MLP's gate and up projections are stacked (gate first) into
one linear_fc1. Two checks: the fused matrix has exactly that order (compared row block by row block against the
HF tensors, so a fusion with the wrong head order fails even if its inverse undoes it), and HF -> Megatron -> HF
gives bit-identical tensors. With ``--tp N`` the fused matrix is cut into N contiguous row blocks (a column-parallel
linear's shards) and each rank's block must hold its own KV groups whole, in that order: the KV heads must divide
by N, else no TP split keeps the groups whole and the check fails saying so.
"""
import argparse
import json

import torch

RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "
TEXT_KEYS = ("text_config", "decoder", "generator", "text_encoder", "llm_config", "language_config")


def emit(payload):
    print(RESULT_MARKER + json.dumps(payload, default=str), flush=True)


def heads_from_config(path):
    cfg = json.load(open(path, encoding="utf-8"))
    text = next((cfg[k] for k in TEXT_KEYS if isinstance(cfg.get(k), dict) and "num_attention_heads" in cfg[k]), cfg)
    heads = int(text["num_attention_heads"])
    return heads, int(text.get("num_key_value_heads") or heads), bool(text.get("attention_bias", True))


def tiny_hf_state(layers, heads, kv, head_dim, ffn, bias, seed):
    g = torch.Generator().manual_seed(seed)
    hidden = heads * head_dim
    sd = {}
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes = {"self_attn.q_proj.weight": (heads * head_dim, hidden), "self_attn.k_proj.weight": (kv * head_dim, hidden),
                  "self_attn.v_proj.weight": (kv * head_dim, hidden), "self_attn.o_proj.weight": (hidden, heads * head_dim),
                  "mlp.gate_proj.weight": (ffn, hidden), "mlp.up_proj.weight": (ffn, hidden),
                  "mlp.down_proj.weight": (hidden, ffn)}
        if bias:
            shapes.update({"self_attn.q_proj.bias": (heads * head_dim,), "self_attn.k_proj.bias": (kv * head_dim,),
                           "self_attn.v_proj.bias": (kv * head_dim,)})
        for name, shape in shapes.items():
            sd[p + name] = torch.randn(shape, generator=g)
    return sd


def fuse_qkv(q, k, v, kv):
    """Per KV group: that group's query heads, its key head, its value head (dim 0)."""
    qs, ks, vs = q.chunk(kv, dim=0), k.chunk(kv, dim=0), v.chunk(kv, dim=0)
    return torch.cat([t for group in zip(qs, ks, vs) for t in group], dim=0)


def unfuse_qkv(qkv, kv, q_rows, kv_rows):
    """Inverse of fuse_qkv; q_rows / kv_rows: rows per group."""
    parts = [blk.split([q_rows, kv_rows, kv_rows], dim=0) for blk in qkv.chunk(kv, dim=0)]
    return tuple(torch.cat([p[j] for p in parts], dim=0) for j in range(3))


def to_megatron(sd, layers, heads, kv):
    out = {}
    for i in range(layers):
        h, m = f"model.layers.{i}.", f"decoder.layers.{i}."
        for kind in ("weight", "bias"):
            if h + f"self_attn.q_proj.{kind}" in sd:
                out[m + f"self_attention.linear_qkv.{kind}"] = fuse_qkv(
                    *(sd[h + f"self_attn.{x}_proj.{kind}"] for x in "qkv"), kv)
        out[m + "self_attention.linear_proj.weight"] = sd[h + "self_attn.o_proj.weight"]
        out[m + "mlp.linear_fc1.weight"] = torch.cat([sd[h + "mlp.gate_proj.weight"], sd[h + "mlp.up_proj.weight"]])
        out[m + "mlp.linear_fc2.weight"] = sd[h + "mlp.down_proj.weight"]
    return out


def to_hf(sd, layers, heads, kv, head_dim):
    out = {}
    q_rows, kv_rows = heads // kv * head_dim, head_dim
    for i in range(layers):
        h, m = f"model.layers.{i}.", f"decoder.layers.{i}."
        for kind in ("weight", "bias"):
            if m + f"self_attention.linear_qkv.{kind}" in sd:
                q, k, v = unfuse_qkv(sd[m + f"self_attention.linear_qkv.{kind}"], kv, q_rows, kv_rows)
                out.update({h + f"self_attn.q_proj.{kind}": q, h + f"self_attn.k_proj.{kind}": k,
                            h + f"self_attn.v_proj.{kind}": v})
        out[h + "self_attn.o_proj.weight"] = sd[m + "self_attention.linear_proj.weight"]
        gate, up = sd[m + "mlp.linear_fc1.weight"].chunk(2, dim=0)
        out.update({h + "mlp.gate_proj.weight": gate, h + "mlp.up_proj.weight": up,
                    h + "mlp.down_proj.weight": sd[m + "mlp.linear_fc2.weight"]})
    return out


def layout_problems(hf, mg, layers, heads, kv, head_dim, tp=1):
    """Independent of fuse_qkv: cut the fused rows into ``tp`` rank shards, walk each and name the first block that
    is not the expected head; rank r holds KV groups r * kv/tp .. (r + 1) * kv/tp - 1."""
    per_group, local = heads // kv, kv // tp
    for i in range(layers):
        q = hf[f"model.layers.{i}.self_attn.q_proj.weight"]
        k = hf[f"model.layers.{i}.self_attn.k_proj.weight"]
        v = hf[f"model.layers.{i}.self_attn.v_proj.weight"]
        fused = mg[f"decoder.layers.{i}.self_attention.linear_qkv.weight"]
        for r, shard in enumerate(fused.chunk(tp, dim=0)):
            row = 0
            for g in range(r * local, (r + 1) * local):
                expected = [(f"q head {g * per_group + j}", q[(g * per_group + j) * head_dim:][:head_dim])
                            for j in range(per_group)]
                expected += [(f"k head {g}", k[g * head_dim:][:head_dim]), (f"v head {g}", v[g * head_dim:][:head_dim])]
                for label, want in expected:
                    if not torch.equal(shard[row:row + head_dim], want):
                        return [f"layer {i}, tp rank {r}: rows {row}..{row + head_dim - 1} of linear_qkv are not "
                                f"{label} (group {g})"]
                    row += head_dim
    return []


def check(layers=2, heads=4, kv=2, head_dim=8, bias=True, seed=0, tp=1):
    if heads % kv:
        return {"error": f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}"}
    if kv % tp:
        return {"ok": False, "problems": [f"num_key_value_heads {kv} does not divide by tp {tp}: no TP split keeps "
                                          "the KV groups whole"], "heads": heads, "kv_heads": kv, "tp": tp,
                "layers_checked": 0}
    hf = tiny_hf_state(layers, heads, kv, head_dim, 2 * heads * head_dim, bias, seed)
    mg = to_megatron(hf, layers, heads, kv)
    back = to_hf(mg, layers, heads, kv, head_dim)
    problems = layout_problems(hf, mg, layers, heads, kv, head_dim, tp)
    if set(back) != set(hf):
        problems.append(f"names differ after the round trip: {sorted(set(hf) ^ set(back))[:4]}")
    problems += [f"{n} differs after HF -> Megatron -> HF" for n in hf if n in back and not torch.equal(hf[n], back[n])]
    return {"ok": not problems, "problems": problems[:10], "tensors": len(hf), "megatron_tensors": len(mg),
            "heads": heads, "kv_heads": kv, "head_dim": head_dim, "layers": layers, "bias": bias, "tp": tp,
            "layers_checked": 0 if problems else layers}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tp", type=int, default=1)
    a = ap.parse_args()
    heads, kv, bias = heads_from_config(a.config) if a.config else (4, 2, True)
    emit(check(a.layers, heads, kv, a.head_dim, bias, a.seed, a.tp))


if __name__ == "__main__":
    main()
