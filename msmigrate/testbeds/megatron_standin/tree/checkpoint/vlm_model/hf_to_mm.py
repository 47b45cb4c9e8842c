"""HF -> Megatron: cut the converted state dict per tensor-parallel rank and write one checkpoint per rank
(``<mm_dir>/release/mp_rank_{tp:02d}/model_optim_rng.pt``; the stand-in keeps a single pipeline stage, so no
``_{pp:03d}`` suffix). Tensors no pattern names (norms, row-parallel biases, the patch embedding) are copied to
every rank."""
import re

import torch

from checkpoint.common.constant import LATEST_TXT, MEGATRON_CKPT_NAME


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


def save_by_tp(state_dicts, mm_dir, iteration="release"):
    for tp_rank, state in enumerate(state_dicts):
        out = mm_dir / iteration / f"mp_rank_{tp_rank:02d}"
        out.mkdir(parents=True, exist_ok=True)
        torch.save({"model": state, "checkpoint_version": 3.0}, out / MEGATRON_CKPT_NAME)
    (mm_dir / LATEST_TXT).write_text(iteration)
