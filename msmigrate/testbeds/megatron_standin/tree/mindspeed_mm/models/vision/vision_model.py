"""Vision encoder + projector, each class picked from its table by the sub-module's ``model_id``."""
import torch

from mindspeed_mm.models.common.module import MultiModalModule
from .projectors.multimodal_projector import MultimodalProjector
from .vision_encoders.qwen2vl_vit_model import Qwen2VLViT

VISION_ENCODER_MAPPINGS = {
    "qwen2vit": Qwen2VLViT,
    "qwen2_5_vit": Qwen2VLViT,
}

VISION_PROJECTION_MAPPINGS = {
    "mlp": MultimodalProjector,
    "lnmlp": MultimodalProjector,
}


class VisionModel(MultiModalModule):
    def __init__(self, config, encoder_transformer_layer_spec=None, projector_layer_spec=None, pre_process=True,
                 post_process=True, *args, **kwargs):
        super().__init__(config=config)
        self.pre_process, self.post_process = pre_process, post_process
        self.add_encoder = config.vision_encoder is not None
        self.add_projector = config.vision_projector is not None and self.post_process
        self.encoder = self.projector = None
        if self.add_encoder:
            self.encoder = VISION_ENCODER_MAPPINGS[config.vision_encoder.model_id](
                config=config.vision_encoder, transformer_layer_spec=encoder_transformer_layer_spec,
                pre_process=self.pre_process, post_process=self.post_process,
                projector_config=config.vision_projector)
        if self.add_projector:
            self.projector = VISION_PROJECTION_MAPPINGS[config.vision_projector.model_id](
                config=config.vision_projector, submodules=projector_layer_spec)

    def freeze(self, freeze_encoder: bool = False, freeze_projector: bool = False):
        for module, frozen in ((self.encoder, freeze_encoder), (self.projector, freeze_projector)):
            if frozen and module is not None:
                for param in module.parameters():
                    param.requires_grad = False

    def forward(self, images: torch.Tensor = None, image_grid_thw: torch.Tensor = None, *args, **kwargs):
        embeddings = self.encoder(pixel_values=images, grid_thw=image_grid_thw)
        return self.projector(embeddings) if self.add_projector else embeddings
