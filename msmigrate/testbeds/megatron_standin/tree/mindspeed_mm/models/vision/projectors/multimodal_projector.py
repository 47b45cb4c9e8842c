"""The projector, one class for two model_ids as in the real framework: ``mlp`` is two linears from the ViT width
(input_size) through ffn_hidden_size to the LLM width; ``lnmlp`` first applies an RMSNorm over the ViT width and
concatenates spatial_merge_size**2 neighbouring patches (ffn_hidden_size = input_size x merge**2), then two linears."""
import torch
import torch.nn.functional as F

from mindspeed_mm.models.common.module import MultiModalModule
from mindspeed_mm.models.common.standin_layers import RMSNorm


class MultimodalProjector(MultiModalModule):
    def __init__(self, config, submodules, use_postshuffle_norm=False):
        super().__init__(config=config)
        self.projector_type = config.model_id
        if submodules is None:
            raise AssertionError("MLPSubmodules must be provided")
        bias = submodules.get("bias", True)
        self.encoder = torch.nn.Module()
        if self.projector_type == "mlp":
            self.encoder.linear_fc1 = torch.nn.Linear(config.input_size, config.ffn_hidden_size, bias=bias)
        elif self.projector_type == "lnmlp":
            self.layernorm = RMSNorm(config.input_size, getattr(config, "layernorm_epsilon", 1e-6))
            self.encoder.linear_fc1 = torch.nn.Linear(config.ffn_hidden_size, config.ffn_hidden_size, bias=bias)
        else:
            raise ValueError(f"Unsupported multimodal projection type {self.projector_type}")
        self.encoder.linear_fc2 = torch.nn.Linear(config.ffn_hidden_size, config.hidden_size, bias=bias)

    def forward(self, hidden_states):
        if self.projector_type == "lnmlp":
            hidden_states = self.layernorm(hidden_states).reshape(-1, self.config.ffn_hidden_size)
        return self.encoder.linear_fc2(F.gelu(self.encoder.linear_fc1(hidden_states)))
