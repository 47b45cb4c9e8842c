"""Dataset and dataloader builders named by the data JSON's ``dataset_param`` / ``dataloader_param``.

Stand-in simplification: the real ``huggingface`` dataset renders ShareGPT messages through the chat template and
the processor; the stand-in reads rows that are already tokenized (input_ids, labels, and for images the
processor's pixel_values rows and image_grid_thw) from ``basic_parameters.dataset``. The batch fields are the
ones the real collator hands to VLMModel.forward."""
import json

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from megatron.training import get_args


class PreTokenizedDataset(Dataset):
    def __init__(self, rows, max_samples=None):
        self.rows = rows[:max_samples] if max_samples else rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def build_mm_dataset(dataset_param):
    basic = dataset_param.basic_parameters
    with open(basic.dataset, encoding="utf-8") as f:
        rows = json.load(f)
    if not isinstance(rows, list) or not rows or "input_ids" not in rows[0]:
        raise ValueError(f"{basic.dataset}: expected a JSON list of tokenized rows with input_ids")
    return PreTokenizedDataset(rows, getattr(basic, "max_samples", None))


def _collate(rows, pad_id):
    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        ids[i, :n], labels[i, :n], mask[i, :n] = torch.tensor(r["input_ids"]), torch.tensor(r["labels"]), 1
    batch = {"input_ids": ids, "labels": labels, "attention_mask": mask}
    if any("pixel_values" in r for r in rows):
        batch["pixel_values"] = torch.cat([torch.tensor(r["pixel_values"], dtype=torch.float32) for r in rows])
        batch["image_grid_thw"] = torch.cat([torch.tensor(r["image_grid_thw"], dtype=torch.long) for r in rows])
    return batch


def build_mm_dataloader(dataset, dataloader_param, process_group=None, consumed_samples=0, dataset_param=None,
                        generator=None):
    args = get_args()
    sampler = None
    if dist.is_initialized():
        sampler = DistributedSampler(dataset, shuffle=getattr(dataloader_param, "shuffle", False), seed=args.seed)
    pad_id = getattr(getattr(dataloader_param, "collate_param", None), "pad_token_id", 0)
    return DataLoader(dataset, batch_size=args.micro_batch_size, sampler=sampler,
                      drop_last=getattr(dataloader_param, "drop_last", True),
                      collate_fn=lambda rows: _collate(rows, pad_id))
