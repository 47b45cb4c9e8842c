from megatron.training.global_vars import get_args, print_rank_0  # noqa: F401
