"""lnmlp: RMSNorm over the ViT width, spatial_merge_size**2 neighbouring patches concatenated, two linears."""
import torch
import torch.nn.functional as F

from mindspeed_mm.models.common.module import MultiModalModule
from mindspeed_mm.models.common.standin_layers import RMSNorm


class MultimodalProjector(MultiModalModule):
    def __init__(self, config, submodules, use_postshuffle_norm=False):
        super().__init__(config=config)
        if submodules is None:
            raise AssertionError("MLPSubmodules must be provided")
        bias = submodules.get("bias", True)
        self.merge = config.ffn_hidden_size // config.input_size
        if getattr(config, "model_id", None) == "lnmlp":
            self.layernorm = RMSNorm(config.input_size, getattr(config, "layernorm_epsilon", 1e-6))
        self.encoder = torch.nn.Module()
        self.encoder.linear_fc1 = torch.nn.Linear(config.ffn_hidden_size, config.ffn_hidden_size, bias=bias)
        self.encoder.linear_fc2 = torch.nn.Linear(config.ffn_hidden_size, config.hidden_size, bias=bias)

    def forward(self, x):
        if hasattr(self, "layernorm"):
            x = self.layernorm(x)
        x = x.reshape(-1, self.config.ffn_hidden_size)
        return self.encoder.linear_fc2(F.gelu(self.encoder.linear_fc1(x)))
