"""Data parallel over every rank; tensor, pipeline and context parallel sizes are 1 in the stand-in (it refuses
anything else at start, see mindspeed_mm/training.py)."""
import torch.distributed as dist


def _world():
    return dist.get_world_size() if dist.is_initialized() else 1


def get_data_parallel_group():
    return dist.group.WORLD if dist.is_initialized() else None


def get_data_parallel_world_size():
    return _world()


def get_context_parallel_group():
    return None


def get_context_parallel_world_size():
    return 1


def get_tensor_model_parallel_world_size():
    return 1


def get_pipeline_model_parallel_world_size():
    return 1


def get_pipeline_model_parallel_rank():
    return 0


def get_virtual_pipeline_model_parallel_world_size():
    return None


def is_pipeline_first_stage():
    return True


def is_pipeline_last_stage():
    return True
