"""Megatron -> HF: read every tensor-parallel rank's checkpoint and merge each tensor back with the splitter that
cut it (copied tensors: rank 0's)."""
import re

import torch

from checkpoint.common.constant import LATEST_TXT, MEGATRON_CKPT_NAME


def load_from_mm(mm_dir, tp_size):
    tag = (mm_dir / LATEST_TXT).read_text().strip()
    sub = tag if tag == "release" else f"iter_{int(tag):07d}"
    return [torch.load(mm_dir / sub / f"mp_rank_{tp_rank:02d}" / MEGATRON_CKPT_NAME, map_location="cpu",
                       weights_only=False)["model"] for tp_rank in range(tp_size)]


def merge_by_tp(state_dicts, patterns):
    if len(state_dicts) == 1:
        return state_dicts[0]
    merged = {}
    for key in state_dicts[0]:
        splitter = next((s for p, s in patterns.items() if re.fullmatch(p, key)), None)
        merged[key] = splitter.merge([sd[key] for sd in state_dicts]) if splitter else state_dicts[0][key]
    return merged
