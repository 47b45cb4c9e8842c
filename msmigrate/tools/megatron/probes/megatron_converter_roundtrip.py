"""Probe (Megatron route, model phase): the TARGET's own weight converter, HF -> Megatron layout -> HF, on a tiny
model; the tensors must come back identical.

    python megatron_converter_roundtrip.py --target ROOT --converter NAME --work DIR
        (--hf-dir DIR | --tiny-config CONFIG.json | --shrink-source HF_DIR) [--tp 1] [--pp 1] [--vpp 1]
        [--llm-pp-layers JSON] [--vit-pp-layers JSON]
        [--extra-path DIR ...] [--taps JSON]

Runs in the target runtime with the target root on sys.path; imports nothing from msmigrate. The converter class is
found by name in the target's checkpoint/ sources and its module imported alone (the package __init__ pulls in
every converter of every task). ``hf_to_mm`` and ``mm_to_hf`` get the config objects their own annotations name
(pydantic models in MindSpeed-MM, built from a nested dict; a plain namespace when unannotated). ``--tiny-config``:
the probe first builds a random model of that config's architecture with transformers and saves it;
``--shrink-source``: the same from the source's config.json with 2 layers per stack and a 512-token vocabulary
(widths and head counts kept: they decide the fused QKV split).

One known obstacle is handled in the open: MindSpeed-MM's ``load_from_mm`` imports ``mindspeed.megatron_adaptor``
for its side effects (patching Megatron), and that module imports torch_npu, absent without an NPU. If mm_to_hf
fails on exactly that import, the probe registers an empty module under that name, retries once and reports it
in ``stubbed``; the loading, merging and op reverts that run are still the target's code.

Checks: same tensor names and bit-identical tensors after the round trip; on every TP rank (its pipeline stages
put together), the fused text ``linear_qkv`` rows in MindSpeed-MM's order (rank r holds KV groups r * kv/tp ..;
per KV group: its query heads, its key head, its value head), compared row block by row block with the HF q/k/v
(independent of the converter's code, so a split and merge that are wrong the same way both directions fail). No
text layer checked is a problem, never a pass.
With virtual pipeline stages (more than one per-VPP list), the framework writes each pipeline rank's virtual
stages into one file as ``model0``, ``model1``, ... (virtual stage v of rank p is flat stage v * pp + p, its layers
numbered from 0), and its mm_to_hf reads ``model`` only. So the probe checks that layout itself: it converts the
same model again at one stage, puts every virtual stage's tensors back at their global layer numbers (the offset is
the layer count of the flat stages before it), and needs exactly the single-stage checkpoint, tensor for tensor; the
HF round trip then runs on the single-stage one.
``--taps {"hf_list", "index_field", "attr"}`` (per-layer mergers, Qwen3-VL's deepstack ones): merger i's tensors
must reach the Megatron checkpoint under ``layers.<k>.<attr>.`` where k is entry i of the tiny model's vision
config ``index_field``, and no tower layer outside that list may hold the attribute; at TP = 1 each merger matrix
is found by value (the random init makes them unique), at TP > 1 by name only.
"""
import argparse
import ast
import importlib
import inspect
import json
import os
import re
import shutil
import sys
import types
from pathlib import Path

RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "
TEXT_KEYS = ("text_config", "llm_config", "language_config")
NPU_ADAPTOR = "mindspeed.megatron_adaptor"


def emit(payload):
    print(RESULT_MARKER + json.dumps(payload, default=str), flush=True)


def find_converter(target, name):
    """Dotted module of ``class <name>`` under <target>/checkpoint (AST; nothing imported)."""
    for path in sorted((Path(target) / "checkpoint").rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        if any(isinstance(n, ast.ClassDef) and n.name == name for n in tree.body):
            return ".".join(path.relative_to(target).with_suffix("").parts)
    return None


LAYER_KEYS = ("num_hidden_layers", "depth", "num_layers")
INDEX_LISTS = ("fullatt_block_indexes", "deepstack_visual_indexes")


def shrink_source_config(cfg, layers=2, vocab=512):
    """The source's config.json with at most ``layers`` layers per stack and a small vocabulary; widths and head
    counts stay the source's (they decide the fused QKV split). Per-layer index lists keep the indexes below the
    new depth (at least the last layer), per-layer type lists are cut."""
    def visit(d):
        n = None
        for key in LAYER_KEYS:
            if isinstance(d.get(key), int) and d[key] > layers:
                d[key], n = layers, layers
        if isinstance(d.get("vocab_size"), int) and d["vocab_size"] > vocab:
            d["vocab_size"] = vocab
        for key in INDEX_LISTS:
            if n and isinstance(d.get(key), list):
                d[key] = [i for i in d[key] if isinstance(i, int) and i < n] or [n - 1]
        if n and isinstance(d.get("layer_types"), list):
            d["layer_types"] = d["layer_types"][:n]
        for v in d.values():
            if isinstance(v, dict):
                visit(v)
    out = json.loads(json.dumps(cfg))
    visit(out)
    return out


def make_tiny(config_path, out_dir, seed):
    import torch
    import transformers

    src = Path(out_dir).parent / "tiny_config"
    src.mkdir(parents=True, exist_ok=True)
    (src / "config.json").write_text(Path(config_path).read_text(encoding="utf-8"), encoding="utf-8")
    config = transformers.AutoConfig.from_pretrained(str(src))
    cls = getattr(transformers, config.architectures[0])
    torch.manual_seed(seed)
    # sharded on purpose: the converter's mm_to_hf splits by the index a sharded release carries
    cls(config).save_pretrained(str(out_dir), safe_serialization=True, max_shard_size="100KB")


def ensure_index(hf_dir, work, notes):
    """MindSpeed-MM's mm_to_hf splits its output by the source's model.safetensors.index.json and reads the shard
    number from names like model-00001-of-00002.safetensors (real releases are sharded that way). A folder
    without an index is copied, its files renamed to that pattern and an index written; the note says so."""
    hf_dir = Path(hf_dir)
    if (hf_dir / "model.safetensors.index.json").is_file():
        return hf_dir

    from safetensors import safe_open

    copy = Path(work) / "hf_indexed"
    shutil.copytree(hf_dir, copy, dirs_exist_ok=True)
    shards = sorted(copy.glob("*.safetensors"))
    weight_map = {}
    for i, f in enumerate(shards, 1):
        new = copy / f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        f.rename(new)
        with safe_open(str(new), "pt") as st:
            weight_map.update({k: new.name for k in st.keys()})
    (copy / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    notes.append(f"{hf_dir} has no model.safetensors.index.json: converted a copy with sharded names and an index "
                 "(mm_to_hf splits its output by them)")
    return copy


def load_safetensors(folder):
    from safetensors.torch import load_file

    out = {}
    for f in sorted(Path(folder).glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


def cfg_object(fn, candidates):
    """The first candidate dict the function's annotated config type accepts (pydantic), else a namespace."""
    ann = inspect.signature(fn).parameters["cfg"].annotation if "cfg" in inspect.signature(fn).parameters else None
    if ann is inspect.Parameter.empty or not hasattr(ann, "model_validate"):
        def ns(d):
            return types.SimpleNamespace(**{k: ns(v) if isinstance(v, dict) else v for k, v in d.items()})
        return ns(candidates[0]), "namespace"
    errors = []
    for cand in candidates:
        try:
            return ann.model_validate(cand), ann.__name__
        except Exception as exc:  # probe boundary: pydantic's ValidationError, whatever the target's validators raise
            errors.append(f"{type(exc).__name__}: {str(exc)[:400]}")
    raise ValueError(f"{ann.__name__} accepts none of the configs tried: {errors}")


def layer_counts(hf_dir):
    cfg = json.loads((Path(hf_dir) / "config.json").read_text(encoding="utf-8"))
    text = next((cfg[k] for k in TEXT_KEYS if isinstance(cfg.get(k), dict)), cfg)
    vision = cfg.get("vision_config") or {}
    return int(text["num_hidden_layers"]), int(vision.get("depth") or vision.get("num_hidden_layers") or 0), text


def pp_stages(layers, pp):
    """The text decoder's layers over ``pp`` stages, as even as they go (the earlier stages take the remainder);
    the vision encoder stays whole on the first stage, as the framework's examples place it."""
    return [layers // pp + (1 if i < layers % pp else 0) for i in range(pp)]


def one_rank_layers(stages, llm_stage_layers):
    """One TP rank's stages as one dict with the text layers at their global index (a stage numbers its layers from
    0; its offset is the layer count of the stages before it, the framework's convention), so the fused qkv order
    is checked on every layer whatever the PP size. ``stages``: that rank's checkpoints in stage order."""
    import torch

    out, offset = {}, 0
    for stage, count in zip(stages, llm_stage_layers):
        for key, value in (stage.get("model") or {}).items():
            m = re.fullmatch(r"text_decoder\.decoder\.layers\.(\d+)\.(.*)", key)
            if isinstance(value, torch.Tensor):
                out[f"text_decoder.decoder.layers.{int(m.group(1)) + offset}.{m.group(2)}" if m else key] = value
        offset += count
    return out


def files_by_tp_rank(files):
    """The checkpoint files (``release/mp_rank_TT[_PPP]/model_optim_rng.pt``) per TP rank, in stage order."""
    ranks = {}
    for f in files:
        m = re.fullmatch(r"mp_rank_(\d+)(?:_(\d+))?", Path(f).parent.name)
        if m:
            ranks.setdefault(int(m.group(1)), []).append((int(m.group(2) or 0), f))
    return {r: [f for _, f in sorted(fs)] for r, fs in sorted(ranks.items())}


def text_qkv_layers(hf, text_cfg):
    """{layer index: HF q_proj name} of the TEXT decoder: the q_proj/k_proj stack whose layer count is the text
    config's and whose row counts are its heads x head_dim and KV heads x head_dim (a vision tower's attention may
    use the same names)."""
    heads = int(text_cfg["num_attention_heads"])
    kv = int(text_cfg.get("num_key_value_heads") or heads)
    hd = text_cfg.get("head_dim") or int(text_cfg["hidden_size"]) // heads
    stacks = {}
    for name, q in hf.items():
        m = re.fullmatch(r"(.*)layers\.(\d+)\.self_attn\.q_proj\.weight", name)
        k = hf.get(name.replace("q_proj", "k_proj"))
        if m and k is not None and q.shape[0] == heads * hd and k.shape[0] == kv * hd:
            stacks.setdefault(m.group(1), {})[int(m.group(2))] = name
    want = int(text_cfg.get("num_hidden_layers") or 0)
    return next((s for s in stacks.values() if len(s) == want), {})


def qkv_layout_problems(hf, mg_by_rank, text_cfg):
    """Every text layer's fused linear_qkv (weight, and bias where the source has one) on EVERY TP rank against
    the HF q/k/v, row block by row block: TP rank r holds KV groups r * kv/tp .. (r + 1) * kv/tp - 1, each as its
    query heads, its key head, its value head. Independent of the converter's code, so a split / merge pair that
    is wrong in the same way both directions fails here even though the round trip is lossless.
    Returns (problems, layers checked on every rank)."""
    heads = int(text_cfg["num_attention_heads"])
    kv = int(text_cfg.get("num_key_value_heads") or heads)
    tp = len(mg_by_rank)
    layers = text_qkv_layers(hf, text_cfg)
    if not layers:
        return [f"linear_qkv order checked on 0 layers: no text decoder q_proj/k_proj/v_proj with "
                f"{heads} heads / {kv} KV heads among the HF tensors"], 0
    if not tp:
        return ["linear_qkv order checked on 0 layers: no per-TP-rank checkpoint file (mp_rank_NN) was written"], 0
    if kv % tp:
        return [f"num_key_value_heads {kv} does not divide by tp {tp}: the KV groups cannot be split over the TP "
                "ranks (Megatron splits linear_qkv by whole groups)"], 0
    local, per = kv // tp, heads // kv
    problems, checked = [], 0
    for i, name in sorted(layers.items()):
        layer_ok = True
        for kind in ("weight", "bias"):
            stem = name[:-len("q_proj.weight")]
            q, k, v = (hf.get(f"{stem}{x}_proj.{kind}") for x in "qkv")
            if q is None or k is None or v is None:
                continue
            hd = q.shape[0] // heads
            for r, mg in mg_by_rank.items():
                fused = mg.get(f"text_decoder.decoder.layers.{i}.self_attention.linear_qkv.{kind}")
                if fused is None:
                    problems.append(f"layer {i}: tp rank {r} has no linear_qkv.{kind}")
                    layer_ok = False
                    continue
                row, bad = 0, None
                for g in range(r * local, (r + 1) * local):
                    blocks = [(f"q head {g * per + j}", q[(g * per + j) * hd:][:hd]) for j in range(per)]
                    blocks += [(f"k head {g}", k[g * hd:][:hd]), (f"v head {g}", v[g * hd:][:hd])]
                    for label, want in blocks:
                        got = fused[row:row + hd]
                        if not (got.shape == want.shape and bool((got == want).all())):
                            bad = f"rows {row}..{row + hd - 1} of linear_qkv.{kind} are not {label} (KV group {g})"
                            break
                        row += hd
                    if bad:
                        break
                if bad:
                    problems.append(f"layer {i}, tp rank {r}: {bad}")
                    layer_ok = False
                    continue
                if row != fused.shape[0]:
                    problems.append(f"layer {i}, tp rank {r}: linear_qkv.{kind} has {fused.shape[0]} rows, "
                                    f"its {local} KV group(s) {row}")
                    layer_ok = False
        checked += layer_ok
    return problems[:5], checked


def tap_problems(hf, stages, hf_dir, taps, tp):
    """Each per-layer merger lands on the tap of the tower layer its index names (see the module docstring)."""
    import torch

    cfg = json.loads((Path(hf_dir) / "config.json").read_text(encoding="utf-8"))
    indexes = (cfg.get("vision_config") or {}).get(taps["index_field"])
    if not isinstance(indexes, list):
        return [f"the tiny model's vision config has no list {taps['index_field']}"], 0
    attr = re.escape(taps["attr"])
    mm = {k: v for st in stages[:1] for key, sd in st.items() if key.startswith("model") and isinstance(sd, dict)
          for k, v in sd.items() if isinstance(v, torch.Tensor)}
    at = {int(m.group(1)) for k in mm if (m := re.search(rf"\.layers\.(\d+)\.{attr}\.", k))}
    problems = []
    if at != set(indexes):
        problems.append(f"the Megatron checkpoint holds {taps['attr']} on tower layers {sorted(at)}; the source's "
                        f"{taps['index_field']} is {indexes}")
    checked = 0
    for i, k in enumerate(indexes):
        mine = {n: t for n, t in hf.items() if n.startswith(f"{taps['hf_list']}.{i}.")}
        if not mine:
            problems.append(f"the tiny model has no tensors under {taps['hf_list']}.{i}")
        for n, t in mine.items() if tp == 1 else ():
            if t.dim() != 2 or bool((t == t.flatten()[0]).all()):
                continue  # a constant tensor (a norm's ones) cannot be told apart by value
            homes = [m for m, v in mm.items() if v.shape == t.shape and torch.equal(v, t)]
            checked += 1
            if not any(re.search(rf"\.layers\.{k}\.{attr}\.", m) for m in homes):
                problems.append(f"{n} (merger {i}, tower layer {k}) lands on {homes[:2] or 'no tensor'}, not on "
                                f"layers.{k}.{taps['attr']}")
    return problems, checked


TEXT_LAYERS, VIT_LAYERS = "text_decoder.decoder.layers.", "image_encoder.encoder.blocks.layers."


def vpp_layout_problems(mm_dir, ref_dir, llm_pp, vit_pp, tp):
    """The VPP checkpoint against the single-stage one (see the module docstring); returns (problems, stages)."""
    import torch

    vpp, pp = len(llm_pp), len(llm_pp[0])
    flat = {TEXT_LAYERS: [n for s in llm_pp for n in s], VIT_LAYERS: [n for s in vit_pp for n in s]}
    problems, checked = [], 0
    for tp_rank in range(tp):
        ref = torch.load(Path(ref_dir) / "release" / f"mp_rank_{tp_rank:02d}" / "model_optim_rng.pt",
                         map_location="cpu", weights_only=False)["model"]
        merged = {}
        for pp_rank in range(pp):
            name = f"mp_rank_{tp_rank:02d}" + (f"_{pp_rank:03d}" if pp > 1 else "")
            ckpt = torch.load(Path(mm_dir) / "release" / name / "model_optim_rng.pt", map_location="cpu",
                              weights_only=False)
            for v in range(vpp):
                stage, part = v * pp + pp_rank, ckpt.get(f"model{v}")
                if not isinstance(part, dict):
                    problems.append(f"{name} has no model{v} (virtual stage {v} of pipeline rank {pp_rank})")
                    continue
                checked += 1
                for key, value in part.items():
                    for prefix, counts in flat.items():
                        if key.startswith(prefix):
                            index, rest = key[len(prefix):].split(".", 1)
                            if int(index) >= counts[stage]:
                                problems.append(f"{name} model{v}: {key} is past the stage's {counts[stage]} layers")
                            key = f"{prefix}{int(index) + sum(counts[:stage])}.{rest}"
                            break
                    if key in merged:
                        problems.append(f"{key} is on more than one virtual stage")
                    merged[key] = value
        if set(merged) != set(ref):
            problems.append(f"tp rank {tp_rank}: the virtual stages put back hold {len(merged)} tensors, the "
                            f"single-stage checkpoint {len(ref)} (missing {sorted(set(ref) - set(merged))[:3]}, "
                            f"extra {sorted(set(merged) - set(ref))[:3]})")
        problems += [f"tp rank {tp_rank}: {k} differs from the single-stage checkpoint" for k in ref
                     if k in merged and not (isinstance(ref[k], torch.Tensor) and torch.equal(ref[k], merged[k]))][:5]
    return problems[:10], checked


def run(a):
    import torch

    work = Path(a.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    sys.path[:0] = [str(Path(a.target).resolve())] + [str(Path(x).resolve()) for x in a.extra_path]
    os.chdir(a.target)
    hf_dir = Path(a.hf_dir).resolve() if a.hf_dir else work / "hf"
    if a.shrink_source:
        shrunk = work / "shrunk_config.json"
        cfg = json.loads((Path(a.shrink_source) / "config.json").read_text(encoding="utf-8"))
        shrunk.write_text(json.dumps(shrink_source_config(cfg, layers=max(2, a.pp * a.vpp))), encoding="utf-8")
        a.tiny_config = str(shrunk)
    if a.tiny_config:
        make_tiny(a.tiny_config, hf_dir, a.seed)
    notes = []
    hf_dir = ensure_index(hf_dir, work, notes)
    module = find_converter(a.target, a.converter)
    if module is None:
        return {"error": f"no class {a.converter} under {a.target}/checkpoint"}
    try:
        conv = getattr(importlib.import_module(module), a.converter)
    except ImportError as exc:
        return {"error": f"cannot import {module}: {type(exc).__name__}: {exc}", "module": module,
                "missing_module": getattr(exc, "name", None)}
    llm, vit, text_cfg = layer_counts(hf_dir)
    spread = pp_stages(llm, a.pp * a.vpp)  # flat stage v * pp + p
    llm_pp = json.loads(a.llm_pp_layers) if a.llm_pp_layers else [spread[v * a.pp:(v + 1) * a.pp]
                                                                   for v in range(a.vpp)]
    vit_pp = json.loads(a.vit_pp_layers) if a.vit_pp_layers else [[vit if v == 0 and p == 0 else 0
                                                                    for p in range(a.pp)] for v in range(a.vpp)]
    mm_dir, back = work / "mm", work / "back"
    for old in (mm_dir, back):  # an earlier round trip in this folder (other sizes) must not count as this one's
        shutil.rmtree(old, ignore_errors=True)
    base = {"hf_config": {"hf_dir": str(hf_dir)}}
    nested = {"llm_pp_layers": llm_pp, "vit_pp_layers": vit_pp, "tp_size": a.tp}
    flat = {"llm_pp_layers": [x for s in llm_pp for x in s], "vit_pp_layers": [x for s in vit_pp for x in s],
            "tp_size": a.tp}
    ran, stubbed = [], []
    cfg, cfg_type = cfg_object(conv.hf_to_mm, [{**base, "mm_dir": str(mm_dir), "parallel_config": p}
                                               for p in (nested, flat)])
    conv.hf_to_mm(cfg)
    ran.append(f"{a.converter}.hf_to_mm({cfg_type})")
    vpp_problems, vpp_checked = [], None
    if len(llm_pp) > 1:  # VPP: the layout against a single-stage conversion; mm_to_hf reads that one
        ref_dir = work / "mm_one_stage"
        shutil.rmtree(ref_dir, ignore_errors=True)
        one = {"llm_pp_layers": [[sum(flat["llm_pp_layers"])]], "vit_pp_layers": [[sum(flat["vit_pp_layers"])]],
               "tp_size": a.tp}
        cfg, cfg_type = cfg_object(conv.hf_to_mm, [{**base, "mm_dir": str(ref_dir), "parallel_config": p}
                                                   for p in (one, {k: v[0] if k != "tp_size" else v
                                                                   for k, v in one.items()})])
        conv.hf_to_mm(cfg)
        ran.append(f"{a.converter}.hf_to_mm({cfg_type}) at one stage, the VPP layout's reference")
        vpp_problems, vpp_checked = vpp_layout_problems(mm_dir, ref_dir, llm_pp, vit_pp, a.tp)
        vpp_dir, mm_dir = mm_dir, ref_dir
        flat = {"llm_pp_layers": one["llm_pp_layers"][0], "vit_pp_layers": one["vit_pp_layers"][0], "tp_size": a.tp}
        nested = one
    back_cands = [{**base, "mm_dir": str(mm_dir), "save_hf_dir": str(back), "parallel_config": p} for p in (flat, nested)]
    cfg, cfg_type = cfg_object(conv.mm_to_hf, back_cands)
    try:
        conv.mm_to_hf(cfg)
    except ModuleNotFoundError as exc:
        if exc.name not in ("torch_npu", NPU_ADAPTOR) or NPU_ADAPTOR in stubbed:
            raise
        sys.modules[NPU_ADAPTOR] = types.ModuleType(NPU_ADAPTOR)
        stubbed.append(f"{NPU_ADAPTOR} (imports torch_npu: {exc}); load_from_mm imports it only for its side effects")
        conv.mm_to_hf(cfg)
    ran.append(f"{a.converter}.mm_to_hf({cfg_type})")
    hf, out = load_safetensors(hf_dir), load_safetensors(back)
    files = sorted(mm_dir.rglob("model_optim_rng.pt"))
    vpp_files = len(sorted(vpp_dir.rglob("model_optim_rng.pt"))) if vpp_checked is not None else None
    stages = [torch.load(f, map_location="cpu", weights_only=False) for f in files]
    names = {k for st in stages for key, sd in st.items() if key.startswith("model") and isinstance(sd, dict)
             for k in sd}
    loaded = dict(zip(files, stages))
    mg_by_rank = {r: one_rank_layers([loaded[f] for f in fs], flat["llm_pp_layers"])
                  for r, fs in files_by_tp_rank(files).items()}
    if sorted(mg_by_rank) != list(range(a.tp)):
        problems_tp = [f"hf_to_mm wrote checkpoints for TP ranks {sorted(mg_by_rank)}, the launch has tp={a.tp}"]
    else:
        problems_tp = []
    mg = mg_by_rank.get(0, {})
    problems = list(vpp_problems) + problems_tp
    if not files:
        problems.append(f"hf_to_mm wrote no model_optim_rng.pt under {mm_dir}")
    # a round trip is trivially identical for weights the converter passes through untouched: name them
    untouched = sorted(set(hf) & names)
    if untouched:
        problems.append(f"{len(untouched)} of {len(hf)} HF tensor names reach the Megatron checkpoint unchanged "
                        f"(e.g. {untouched[:3]}): the converter does not map these weights")
    if set(hf) != set(out):
        problems.append(f"names differ after the round trip: missing {sorted(set(hf) - set(out))[:4]}, "
                        f"extra {sorted(set(out) - set(hf))[:4]}")
    problems += [f"{n} differs after HF -> Megatron -> HF" for n in hf
                 if n in out and not (hf[n].shape == out[n].shape and torch.equal(hf[n], out[n]))][:10]
    layout, checked = qkv_layout_problems(hf, mg_by_rank, text_cfg)
    problems += layout
    taps_checked = None
    if a.taps and files:
        tap_issues, taps_checked = tap_problems(hf, stages, hf_dir, json.loads(a.taps), a.tp)
        problems += tap_issues
    return {"ok": not problems, "problems": problems, "ran": ran, "stubbed": stubbed, "notes": notes, "module": module,
            "hf_tensors": len(hf), "megatron_files": len(files), "megatron_tensors": len(mg) or None,
            "qkv_layers_checked": checked, "tap_matrices_checked": taps_checked,
            "vpp_stages_checked": vpp_checked, "vpp_files": vpp_files, "llm_pp_layers": llm_pp, "vit_pp_layers": vit_pp, "tp": a.tp,
            "hf_dir": str(hf_dir), "sample_megatron_names": sorted(mg)[:6]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--converter", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--hf-dir")
    ap.add_argument("--tiny-config")
    ap.add_argument("--shrink-source", help="HF folder whose config.json, shrunk, gives the tiny model")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--pp", type=int, default=1, help="pipeline stages when no explicit per-stage layer lists")
    ap.add_argument("--vpp", type=int, default=1, help="virtual stages per pipeline rank (no explicit lists)")
    ap.add_argument("--llm-pp-layers")
    ap.add_argument("--vit-pp-layers")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--taps", help='per-layer mergers: {"hf_list", "index_field", "attr"}')
    ap.add_argument("--extra-path", action="append", default=[], help="more import roots (a MindSpeed checkout)")
    a = ap.parse_args()
    if not (a.hf_dir or a.tiny_config or a.shrink_source):
        emit({"error": "give --hf-dir, --tiny-config or --shrink-source"})
        return
    try:
        emit(run(a))
    except Exception as exc:  # probe boundary: the target's converter may raise anything; report it as data
        import traceback

        emit({"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]})


if __name__ == "__main__":
    main()
