"""HF -> Megatron: cut the converted state dict per pipeline stage, then each stage per tensor-parallel rank, and
write one checkpoint per (TP rank, PP stage): ``<mm_dir>/release/mp_rank_{tp:02d}/model_optim_rng.pt`` with one
stage, ``mp_rank_{tp:02d}_{pp:03d}`` with more, as the framework names them. With virtual pipeline stages (VPP)
the stages are flat (virtual stage v of pipeline rank p is stage v * pp + p) and each rank's file holds its
virtual stages as ``model0``, ``model1``, ... (the real save_by_vpp); mm_to_hf reads ``model`` only, as the real
one does, so a VPP checkpoint is not read back.

Pipeline stages follow the model JSON's ``pipeline_num_layers`` (one count per stage for each stack): a stage holds
its layer range, numbered from 0 on that stage; a stack's first weights (the text embedding, the ViT patch
embedding) go to the first stage holding any of its layers, its last ones (final norm and output layer, the
projector) to the last such stage. Tensors no TP pattern names (norms, row-parallel biases, the patch embedding)
are copied to every TP rank."""
import re

import torch

from checkpoint.common.constant import LATEST_TXT, MEGATRON_CKPT_NAME

# per stack: the prefix of its numbered layers, the weights of its first stage, the weights of its last stage
STACKS = {
    "text": ("text_decoder.decoder.layers.", ("text_decoder.embedding.",),
             ("text_decoder.decoder.final_layernorm.", "text_decoder.output_layer.")),
    "vit": ("image_encoder.encoder.blocks.layers.", ("image_encoder.encoder.patch_embed.",),
            ("image_encoder.projector.",)),
}


def stage_ranges(counts):
    """[(start, end) per stage] and the first / last stage holding a layer, from per-stage layer counts."""
    ranges, start = [], 0
    for n in counts:
        ranges.append((start, start + n))
        start += n
    held = [i for i, n in enumerate(counts) if n]
    return ranges, (held[0] if held else 0), (held[-1] if held else len(counts) - 1)


def split_by_pp(state_dict, stage_counts):
    """``stage_counts``: {"text": [n per stage], "vit": [n per stage]} (equal lengths). Returns one state dict per
    stage. A tensor of no stack's schema (a name no rename reached) stays on the first stage, so that with one stage
    the checkpoint is what the renames made of the HF dict and the round trip can name what they left unmapped."""
    sizes = {len(c) for c in stage_counts.values()}
    if len(sizes) != 1:
        raise ValueError(f"every stack needs one layer count per pipeline stage, got {stage_counts}")
    stages = [dict() for _ in range(sizes.pop())]
    prefixes = tuple(x for prefix, firsts, lasts in STACKS.values() for x in (prefix, *firsts, *lasts))
    stages[0].update({k: v for k, v in state_dict.items() if not k.startswith(prefixes)})
    for stack, counts in stage_counts.items():
        prefix, firsts, lasts = STACKS[stack]
        ranges, first, last = stage_ranges(counts)
        for key, value in state_dict.items():
            if key.startswith(prefix):
                index, rest = key[len(prefix):].split(".", 1)
                stage = next((s for s, (lo, hi) in enumerate(ranges) if lo <= int(index) < hi), None)
                if stage is None:
                    raise ValueError(f"{key}: layer {index} is in no stage of {counts}")
                stages[stage][f"{prefix}{int(index) - ranges[stage][0]}.{rest}"] = value
            elif key.startswith(firsts):
                stages[first][key] = value
            elif key.startswith(lasts):
                stages[last][key] = value
    return stages


def split_by_tp(state_dict, patterns, tp_size):
    if tp_size == 1:
        return [dict(state_dict)]
    ranks = [dict() for _ in range(tp_size)]
    for key, value in state_dict.items():
        splitter = next((s for p, s in patterns.items() if re.fullmatch(p, key)), None)
        parts = splitter.split(tp_size, value) if splitter else [value] * tp_size
        for rank, part in zip(ranks, parts):
            rank[key] = part.clone()
    return ranks


def rank_dir(tp_rank, pp_rank, pp_size):
    return f"mp_rank_{tp_rank:02d}" + (f"_{pp_rank:03d}" if pp_size > 1 else "")


def save_by_tp(chunks, mm_dir, iteration="release", pp_rank=0, pp_size=1):
    """``chunks``: per virtual stage of this pipeline rank, its state dict per TP rank. One virtual stage is saved
    as ``model``; more as ``model0``, ``model1``, ... (the real save_by_vpp)."""
    for tp_rank in range(len(chunks[0])):
        out = mm_dir / iteration / rank_dir(tp_rank, pp_rank, pp_size)
        out.mkdir(parents=True, exist_ok=True)
        models = ({"model": chunks[0][tp_rank]} if len(chunks) == 1 else
                  {f"model{v}": chunk[tp_rank] for v, chunk in enumerate(chunks)})
        torch.save({**models, "checkpoint_version": 3.0}, out / MEGATRON_CKPT_NAME)
    (mm_dir / LATEST_TXT).write_text(iteration)
