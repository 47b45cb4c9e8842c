"""Probe (Megatron route, static gate): HF vision-tower weights -> the Megatron layout of a vision encoder registered
by model_id -> HF, with the converted state_dict loaded strictly into the class.

    python megatron_encoder_converter.py --target ROOT --registry MODULE:NAME --specs MODULE:NAME
        --model-id ID --fields JSON --source HF_DIR --out DIR

Runs in the target runtime, target root first on sys.path; imports nothing from msmigrate. The class is built the
way the framework builds it (``REGISTRY[model_id]`` with ``SPECS[model_id]``); its state_dict names and shapes are
the layout to fill. The mapping is derived, not tabled per model:
- the tower is the deepest ancestor of the HF tensor shaped like the class's patch convolution that also holds a
  stack of numbered layers of the class's depth;
- inside a layer, the Megatron tensor's role is the framework's own name (linear_qkv, linear_proj, linear_fc1,
  linear_fc2, input_layernorm, pre_mlp_layernorm); the HF tensor's role comes from its module name (q/k/v or a
  fused qkv, the attention output, the first / second MLP linear or gate + up, the norm before attention / before
  the MLP), and every placement is checked against both shapes;
- the fused QKV is written in the block's layout: per query group, that group's query heads, then its key head,
  then its value head (the group count read off the built linear_qkv rows); a gated fc1 is gate then up;
- tensors outside the layers go by shape, ties broken by shared name tokens; no unique candidate: not mapped.
Every HF tower tensor is either mapped or listed as unmapped; every class tensor is filled or listed as unfilled.
The mapping is written to ``DIR/encoder_mapping.json``.
"""
import argparse
import json
import re
from pathlib import Path

try:  # run as a script in the target runtime: the sibling module is on sys.path
    from _megatron_component import build_component, build_failure, emit, enter_target, load_strict, not_identical
except ModuleNotFoundError:  # imported from msmigrate (the unit tests of its pure helpers)
    from msmigrate.tools.megatron.probes._megatron_component import (build_component, build_failure, emit, enter_target,
                                                            load_strict, not_identical)

LAYER = re.compile(r"^(.*?)\.(\d+)\.(.+)$")
# HF module-name endings per role (naming conventions of transformers' vision towers, not model names)
HF_ROLES = {
    "q": r"(q_proj|query|q)", "k": r"(k_proj|key|k)", "v": r"(v_proj|value|v)",
    "qkv": r"(qkv|qkv_proj|in_proj|query_key_value|Wqkv)",
    "proj": r"(attn\.proj|attention\.proj|out_proj|o_proj|attention\.output\.dense|self_attn\.dense)",
    "fc1": r"(fc1|c_fc|intermediate\.dense|linear_fc1|mlp\.fc_in)", "gate": r"(gate_proj|w1)", "up": r"(up_proj|w3)",
    "fc2": r"(fc2|c_proj|down_proj|mlp\.fc_out|linear_fc2|(?<!attention\.)output\.dense|w2)",
    "norm1": r"(layer_norm1|norm1|ln_1|input_layernorm|layernorm_before)",
    "norm2": r"(layer_norm2|norm2|ln_2|post_attention_layernorm|layernorm_after)",
}
MM_ROLES = {"linear_qkv": "qkv", "linear_proj": "proj", "linear_fc1": "fc1", "linear_fc2": "fc2",
            "input_layernorm": "norm1", "pre_mlp_layernorm": "norm2"}


def hf_role(module_name):
    for role, pat in HF_ROLES.items():
        if re.search(r"(^|\.)" + pat + r"$", module_name):
            return role
    return None


def mm_role(module_name):
    return MM_ROLES.get(module_name.split(".")[-1])


def split_param(name):
    module, _, kind = name.rpartition(".")
    return module, kind


def tokens(name):
    return {t for t in re.split(r"[._]+", name) if t and not t.isdigit() and t not in ("weight", "bias")}


def layered(names, prefix=""):
    """{stack path: {layer index: {rest: full name}}} for names under prefix."""
    out = {}
    for n in names:
        if not n.startswith(prefix):
            continue
        m = LAYER.match(n[len(prefix):])
        if m:
            out.setdefault(m.group(1), {}).setdefault(int(m.group(2)), {})[m.group(3)] = n
    return out


def find_tower(hf, patch_shape, depth):
    patch = [n for n, t in hf.items() if list(t.shape) == patch_shape]
    for name in patch:
        parts = name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:cut]) + "."
            stacks = {p: s for p, s in layered(hf, prefix).items() if len(s) == depth}
            if len(stacks) == 1:
                return prefix, name, next(iter(stacks.items()))
    return None, (patch[0] if patch else None), (None, {})


def qkv_fuse(q, k, v, groups):
    """[q; k; v] rows -> per group: its query heads, its key head, its value head (the block's split)."""
    head_dim = k.shape[0] // groups
    per = q.shape[0] // head_dim // groups
    qs = q.reshape(groups, per * head_dim, *q.shape[1:])
    ks, vs = (t.reshape(groups, head_dim, *t.shape[1:]) for t in (k, v))
    import torch
    return torch.cat([qs, ks, vs], dim=1).reshape(-1, *q.shape[1:]), head_dim, per


def qkv_split(fused, groups, head_dim, per):
    g = fused.reshape(groups, (per + 2) * head_dim, *fused.shape[1:])
    q = g[:, :per * head_dim].reshape(-1, *fused.shape[1:])
    return q, g[:, per * head_dim:(per + 1) * head_dim].reshape(-1, *fused.shape[1:]), \
        g[:, (per + 1) * head_dim:].reshape(-1, *fused.shape[1:])


def convert(hf, sd, fields):
    """The mapping {megatron name: {"op": ..., "hf": [...]}}, problems, and the HF tower's names."""
    patch_mm = [n for n, t in sd.items() if t.dim() >= 4]
    if len(patch_mm) != 1:
        return None, [f"the class has {len(patch_mm)} tensors of 4 or more dims, want one patch convolution"], []
    depth = int(fields["num_layers"])
    prefix, patch_hf, (stack, hf_layers) = find_tower(hf, list(sd[patch_mm[0]].shape), depth)
    if prefix is None:
        return None, [f"no HF tower: no ancestor of a tensor shaped {list(sd[patch_mm[0]].shape)} ({patch_hf}) holds "
                      f"a stack of {depth} numbered layers"], []
    tower = sorted(n for n in hf if n.startswith(prefix))
    mm_stacks = {p: s for p, s in layered(sd).items() if len(s) == depth}
    if len(mm_stacks) != 1:
        return None, [f"the class has {len(mm_stacks)} layer stacks of depth {depth}"], tower
    heads = int(fields["num_attention_heads"])
    mapping, problems = {}, []
    for idx, mm_layer in next(iter(mm_stacks.values())).items():
        roles = {}
        for rest, full in hf_layers.get(idx, {}).items():
            module, kind = split_param(rest)
            role = hf_role(module)
            if role:
                roles.setdefault((role, kind), full)
        for rest, full in mm_layer.items():
            module, kind = split_param(rest)
            role, want = mm_role(module), list(sd[full].shape)
            if role == "qkv" and ("qkv", kind) not in roles and all((r, kind) in roles for r in "qkv"):
                parts = [roles[(r, kind)] for r in "qkv"]
                k_rows, head_dim = hf[parts[1]].shape[0], int(fields["hidden_size"]) // heads
                groups = k_rows // head_dim
                rows = sum(hf[p].shape[0] for p in parts)
                if groups < 1 or heads % groups or rows != want[0] or (heads + 2 * groups) * head_dim != want[0]:
                    problems.append(f"{full} {want}: q/k/v rows {[hf[p].shape[0] for p in parts]} do not fill "
                                    f"{heads} heads of {head_dim} in groups")
                    continue
                mapping[full] = {"op": "qkv_by_group", "hf": parts, "groups": groups, "head_dim": head_dim,
                                 "per_group": heads // groups}
            elif role == "qkv" and ("qkv", kind) in roles and list(hf[roles[("qkv", kind)]].shape) == want:
                # a fused HF qkv is [all q; all k; all v]: regrouped into the block's per-group order
                head_dim = int(fields["hidden_size"]) // heads
                groups = (want[0] // head_dim - heads) // 2
                if groups < 1 or heads % groups:
                    problems.append(f"{full} {want}: no query-group count fits {heads} heads of {head_dim}")
                    continue
                mapping[full] = {"op": "qkv_by_group", "hf": [roles[("qkv", kind)]], "groups": groups,
                                 "head_dim": head_dim, "per_group": heads // groups}
            elif role == "fc1" and ("fc1", kind) not in roles and all((r, kind) in roles for r in ("gate", "up")):
                parts = [roles[("gate", kind)], roles[("up", kind)]]
                if sum(hf[p].shape[0] for p in parts) != want[0]:
                    problems.append(f"{full} {want}: gate + up rows do not add up")
                    continue
                mapping[full] = {"op": "cat_rows", "hf": parts}
            elif role and (role, kind) in roles and list(hf[roles[(role, kind)]].shape) == want:
                mapping[full] = {"op": "copy", "hf": [roles[(role, kind)]]}
    used = {h for m in mapping.values() for h in m["hf"]}
    in_layers = {n for s in hf_layers.values() for n in s.values()}
    for name in (n for n in sd if n not in mapping and not LAYER.match(n)):
        kind = name.rpartition(".")[2]
        # same shape, and a weight only for a weight, a bias only for a bias (a norm's two tensors share a shape)
        cands = [h for h in tower if h not in used and h not in in_layers and list(hf[h].shape) == list(sd[name].shape)
                 and (kind not in ("weight", "bias") or h.rpartition(".")[2] == kind)]
        scored = sorted(((len(tokens(h[len(prefix):]) & tokens(name)), h) for h in cands), reverse=True)
        if len(scored) == 1 or (scored and scored[0][0] > scored[1][0] and scored[0][0] > 0):
            mapping[name] = {"op": "copy", "hf": [scored[0][1]]}
            used.add(scored[0][1])
    return mapping, problems, tower


def to_megatron(hf, mapping):
    import torch
    out = {}
    for name, m in mapping.items():
        parts = [hf[p] for p in m["hf"]]
        if m["op"] == "qkv_by_group":
            if len(parts) == 1:  # fused [q; k; v] rows
                q_rows = m["per_group"] * m["groups"] * m["head_dim"]
                kv = m["groups"] * m["head_dim"]
                parts = [parts[0][:q_rows], parts[0][q_rows:q_rows + kv], parts[0][q_rows + kv:]]
            out[name] = qkv_fuse(*parts, m["groups"])[0].contiguous()
        elif m["op"] == "cat_rows":
            out[name] = torch.cat(parts, dim=0)
        else:
            out[name] = parts[0].clone()
    return out


def to_hf(mm, mapping):
    import torch
    out = {}
    for name, m in mapping.items():
        t = mm[name]
        if m["op"] == "qkv_by_group":
            pieces = qkv_split(t, m["groups"], m["head_dim"], m["per_group"])
            if len(m["hf"]) == 1:
                pieces = (torch.cat(pieces, dim=0),)
        elif m["op"] == "cat_rows":
            first = m["hf_rows"][0]
            pieces = (t[:first], t[first:])
        else:
            pieces = (t,)
        out.update({h: p.clone() for h, p in zip(m["hf"], pieces)})
    return out


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--target", "--registry", "--specs", "--model-id", "--fields", "--source", "--out"):
        ap.add_argument(flag, required=True)
    a = ap.parse_args()
    enter_target(a.target)
    try:
        from safetensors.torch import load_file

        cls, cfg, enc = build_component(a.registry, a.specs, a.model_id, a.fields)
    except Exception as exc:  # probe boundary: building target code may raise anything (missing module, bad config)
        emit(build_failure(exc))
        return
    hf = {}
    for f in sorted(Path(a.source).glob("*.safetensors")):
        hf.update(load_file(str(f)))
    sd = enc.state_dict()
    mapping, problems, tower = convert(hf, sd, vars(cfg))
    if mapping is None:
        emit({"ok": False, "problems": problems, "tower_tensors": len(tower)})
        return
    for m in mapping.values():
        m["hf_rows"] = [int(hf[p].shape[0]) for p in m["hf"]]
    used = {h for m in mapping.values() for h in m["hf"]}
    unmapped = [h for h in tower if h not in used]
    unfilled = [n for n in sd if n not in mapping]
    mm = to_megatron(hf, mapping)
    loaded, strict = load_strict(build_component(a.registry, a.specs, a.model_id, a.fields)[2], mm, cls.__name__)
    problems += loaded
    back = to_hf(mm, mapping)
    differ = not_identical(back, hf)
    problems += [f"{h}: HF -> Megatron -> HF not identical" for h in differ]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "encoder_mapping.json").write_text(json.dumps({"mapping": mapping, "unmapped_hf": unmapped,
                                                          "unfilled_megatron": unfilled}, indent=1))
    emit({"ok": not problems and not unfilled, "class": cls.__name__, "problems": problems,
          "hf_tower_tensors": len(tower), "mapped_hf": len(used), "megatron_tensors": len(sd),
          "unmapped_hf": unmapped, "unfilled_megatron": unfilled, "round_trip_identical": len(back) - len(differ),
          "strict_load": strict is None, "ops": sorted({m["op"] for m in mapping.values()}),
          "mapping_file": str(out / "encoder_mapping.json"),
          "sample": {k: mapping[k]["hf"] for k in list(mapping)[:6]}})


if __name__ == "__main__":
    main()
