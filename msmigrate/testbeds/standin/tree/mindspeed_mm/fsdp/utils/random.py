import random

import numpy as np
import torch


def set_seed(seed, set_deterministic=False):
    """Seed python/numpy/torch and the accelerator (torch.accelerator falls back to torch.cpu on CPU)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.accelerator.manual_seed(seed)
    torch.accelerator.manual_seed_all(seed)
    if set_deterministic:
        torch.use_deterministic_algorithms(True)
