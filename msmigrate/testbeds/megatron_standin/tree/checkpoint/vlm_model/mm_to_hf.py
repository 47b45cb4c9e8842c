"""Megatron -> HF: read every (TP rank, PP stage) checkpoint, merge each stage's tensors back with the splitter that
cut them (copied tensors: rank 0's), and give each stage's layers their global numbers again (the stage's offset is
the sum of the layer counts of the stages before it)."""
import re

import torch

from checkpoint.common.constant import LATEST_TXT, MEGATRON_CKPT_NAME
from checkpoint.vlm_model.hf_to_mm import STACKS, rank_dir, stage_ranges


def load_from_mm(mm_dir, tp_size, pp_size=1):
    """[stage][tp_rank] -> state dict."""
    tag = (mm_dir / LATEST_TXT).read_text().strip()
    sub = tag if tag == "release" else f"iter_{int(tag):07d}"
    return [[torch.load(mm_dir / sub / rank_dir(tp_rank, pp_rank, pp_size) / MEGATRON_CKPT_NAME,
                        map_location="cpu", weights_only=False)["model"] for tp_rank in range(tp_size)]
            for pp_rank in range(pp_size)]


def merge_by_tp(state_dicts, patterns):
    if len(state_dicts) == 1:
        return state_dicts[0]
    merged = {}
    for key in state_dicts[0]:
        splitter = next((s for p, s in patterns.items() if re.fullmatch(p, key)), None)
        merged[key] = splitter.merge([sd[key] for sd in state_dicts]) if splitter else state_dicts[0][key]
    return merged


def merge_by_pp(stages, stage_counts):
    """The stages' state dicts as one, each layer back at its global index."""
    merged = {}
    for pp_rank, state in enumerate(stages):
        for key, value in state.items():
            for stack, counts in stage_counts.items():
                prefix = STACKS[stack][0]
                if key.startswith(prefix):
                    index, rest = key[len(prefix):].split(".", 1)
                    key = f"{prefix}{int(index) + stage_ranges(counts)[0][pp_rank][0]}.{rest}"
                    break
            if key in merged:
                raise ValueError(f"{key} is on more than one pipeline stage")
            merged[key] = value
    return merged
