import torch


class MultiModalModule(torch.nn.Module):
    def __init__(self, config=None):
        super().__init__()
        self.config = config
