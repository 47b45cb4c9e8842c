"""Qwen2-VL style vision encoder: flattened patches (the processor's pixel_values rows) -> patch embedding ->
bidirectional transformer blocks. Window attention and rotary embedding are left out in the stand-in."""
import torch
import torch.nn.functional as F

from mindspeed_mm.models.common.module import MultiModalModule
from mindspeed_mm.models.common.standin_layers import TransformerBlock


class Qwen2VLViT(MultiModalModule):
    def __init__(self, config, transformer_layer_spec, pre_process=True, post_process=True, *args, **kwargs):
        super().__init__(config=config)
        if transformer_layer_spec is None:
            raise KeyError(f"no layer spec for vision_encoder model_id {getattr(config, 'model_id', None)!r}")
        self.patch_embed = torch.nn.Module()
        # HF's Conv3d over temporal patches (same weight name and shape, so converted checkpoints load unchanged);
        # the stand-in applies it as a linear map of the flattened patch rows
        kernel = (config.temporal_patch_size, config.patch_size, config.patch_size)
        self.patch_embed.proj = torch.nn.Conv3d(config.in_channels, config.hidden_size, kernel, stride=kernel,
                                                bias=False)
        self.blocks = TransformerBlock(config, transformer_layer_spec, final_norm=False)

    def forward(self, pixel_values, grid_thw=None, **kwargs):
        x = F.linear(pixel_values, self.patch_embed.proj.weight.flatten(1))
        return self.blocks(x.unsqueeze(0), causal=False).squeeze(0)
