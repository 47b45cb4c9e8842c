"""Logging helpers (stand-in of mindspeed.fsdp.utils.log)."""
import logging
import os
import sys

import torch

LOG_FORMAT = ("[Rank {rank} | Local Rank {local_rank}] %(asctime)s %(levelname)s "
              "[%(name)s:%(lineno)d] => %(message)s")


def set_log_level(level=logging.INFO):
    """Configure the root logger: one stdout handler with the rank-tagged format."""
    fmt = LOG_FORMAT.format(rank=os.environ.get("RANK", "0"), local_rank=os.environ.get("LOCAL_RANK", "0"))
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(fmt))
    root.addHandler(handler)
    root.setLevel(level)


def _current_rank():
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.environ.get("RANK", "0"))


def print_rank(log, message, ranks=0):
    """Call `log(message)` (a logger method or print) on the given rank(s) only (an int or a list of ints)."""
    if _current_rank() not in ([ranks] if isinstance(ranks, int) else ranks):
        return
    _emit(log, message)


def _emit(func, message):
    """Route through a logger with stacklevel=1 so %(lineno)d names this file's call site."""
    owner = getattr(func, "__self__", None)
    if isinstance(owner, logging.Logger):
        # Real MindSpeed-MM log lines always show `[<logger name>:48]` because the logging call
        # sits on line 48 of log.py; the call below is kept on that same line on purpose.
        #
        #
        #
        #
        #
        func(message, stacklevel=1)
        return
    func(message)
