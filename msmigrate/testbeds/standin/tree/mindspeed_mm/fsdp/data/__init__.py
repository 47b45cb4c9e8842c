"""Dataset / dataloader builders (framework core)."""
import torch

from mindspeed_mm.fsdp.data.dataloader.data_collator import resolve_data_collator
from mindspeed_mm.fsdp.data.dataloader.sampler import BaseRandomBatchSampler
from mindspeed_mm.fsdp.utils.register import data_register


def build_mm_dataset(dataset_param):
    """Call the dataset builder registered as `dataset_type` with plain dicts."""
    params = dataset_param.to_dict() if hasattr(dataset_param, "to_dict") else dict(dataset_param)
    for key in ("dataset_type", "basic_parameters", "preprocess_parameters"):
        assert key in params, f"Key parameter missing: {key}"
    builder = data_register.get(params["dataset_type"])
    return builder(basic_param=params["basic_parameters"], preprocess_param=params["preprocess_parameters"],
                   dataset_param=params)


def build_mm_dataloader(dataset, dataloader_param, process_group=None, dataset_param=None, model=None):
    # like the real one, batch_size and seed travel inside dataloader_param (the trainer adds them)
    param = dataloader_param.to_dict() if hasattr(dataloader_param, "to_dict") else dict(dataloader_param)
    batch_size, seed = param.get("batch_size", 1), param.get("seed", 1024)
    mode = param["dataloader_mode"]
    collate_param = param.get("collate_param") or {}
    if mode == "sampler":
        if param["sampler_type"] != "BaseRandomBatchSampler":
            raise NotImplementedError(f"Sampler type {param['sampler_type']} is not implemented.")
        world = torch.distributed.get_world_size(process_group) if torch.distributed.is_initialized() else 1
        rank = torch.distributed.get_rank(process_group) if torch.distributed.is_initialized() else 0
        sampler = BaseRandomBatchSampler(len(dataset), batch_size, world, rank, shuffle=param["shuffle"],
                                         drop_last=param["drop_last"], seed=seed)
        collate_fn = getattr(dataset, "collate_fn", None)
        if not callable(collate_fn):
            cls, kwargs = resolve_data_collator(collate_param, dataset_param)
            collate_fn = cls(dataset_param=dataset_param, model=model, **kwargs)
        return torch.utils.data.DataLoader(dataset, batch_sampler=sampler, collate_fn=collate_fn, num_workers=0,
                                           pin_memory=False)
    if mode == "base":
        cls, kwargs = resolve_data_collator(collate_param, dataset_param)
        return torch.utils.data.DataLoader(dataset, collate_fn=cls(dataset_param=dataset_param, model=model, **kwargs))
    raise NotImplementedError(f"Unsupported dataloader_mode: {mode}")
