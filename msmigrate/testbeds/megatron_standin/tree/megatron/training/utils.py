import torch
import torch.distributed as dist


def average_losses_across_data_parallel_group(losses):
    averaged = torch.cat([loss.clone().detach().view(1) for loss in losses])
    if dist.is_initialized():
        dist.all_reduce(averaged)
        averaged = averaged / dist.get_world_size()
    return averaged
