import torch.distributed as dist

_ARGS = None


def set_args(args):
    global _ARGS
    _ARGS = args


def get_args():
    if _ARGS is None:
        raise RuntimeError("arguments are not parsed yet (pretrain() parses them)")
    return _ARGS


def print_rank_0(message):
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(message, flush=True)
