"""Device meshes for data-parallel / FSDP (TP must be 1; CP sizes are carried but not implemented here)."""
import logging

import torch
from torch.distributed.device_mesh import init_device_mesh

from mindspeed.fsdp.utils.log import print_rank
from mindspeed_mm.fsdp.utils.device import get_device_type

logger = logging.getLogger(__name__)
_STATE = None


class ParallelState:
    # Keyword names and defaults as the real init_parallel_state (every size 1 = one process).
    def __init__(self, data_parallel_size=1, fully_shard_parallel_size=1, tensor_parallel_size=1, ring_attention_size=1,
                 ulysses_parallel_size=1, **_):
        self.ring_attention_size = ring_attention_size
        self.ulysses_parallel_size = ulysses_parallel_size
        self.fsdp_size = int(fully_shard_parallel_size)
        ranks = int(data_parallel_size) * tensor_parallel_size * ring_attention_size * ulysses_parallel_size
        self.mesh = init_device_mesh(get_device_type(), (ranks // self.fsdp_size, self.fsdp_size),
                                     mesh_dim_names=("dp_replicate", "dp_shard_cp"))
        self.dp_group = torch.distributed.group.WORLD
        self.fsdp_mesh = self.mesh["dp_shard_cp"]

    def get_cp_group_size(self):
        return self.ring_attention_size * self.ulysses_parallel_size

    def get_dp_group(self):
        return self.dp_group


def init_parallel_state(data_parallel_size=1, fully_shard_parallel_size=1, **parallel):
    global _STATE
    _STATE = ParallelState(data_parallel_size, fully_shard_parallel_size, **parallel)
    print_rank(logger.info, "Parallel state initialized:\n"
               f"[dp] = True | Group size: {torch.distributed.get_world_size()} | device mesh:{_STATE.mesh}\n"
               f"[fsdp] = True | Group size: {_STATE.fsdp_size} | device mesh:{_STATE.fsdp_mesh}")
    return _STATE


def get_parallel_state():
    return _STATE
