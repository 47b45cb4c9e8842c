"""VLMModel: the assembled model pretrain_vlm.py's model_provider builds from ``args.mm.model``: image encoder
(VisionModel), text decoder (MMGPTModel); image embeddings replace the ``img_context_token_id`` positions.
Returns ``{"loss_dict": {"loss": ...}, "logits": ...}``, the shape loss_func reads."""
from typing import Optional

import torch
import torch.nn.functional as F

from megatron.core import mpu
from mindspeed_mm.models.common.mm_gpt_model import MMGPTModel
from mindspeed_mm.models.common.module import MultiModalModule
from mindspeed_mm.models.common.module_spec.get_layer_spec import (get_llm_layer_spec, get_projector_layer_spec,
                                                                    get_vit_layer_spec)
from mindspeed_mm.models.vision.vision_model import VisionModel


class VLMModel(MultiModalModule):
    def __init__(self, config) -> None:
        super().__init__(config=config)
        self.pre_process, self.post_process = config.pre_process, config.post_process
        self.add_text_encoder = getattr(config, "text_encoder", None) is not None
        self.add_image_encoder = getattr(config, "image_encoder", None) is not None
        self.add_video_encoder = getattr(config, "video_encoder", None) is not None
        self.add_text_decoder = getattr(config, "text_decoder", None) is not None
        self.add_audio_encoder = getattr(config, "audio_encoder", None) is not None
        if self.add_text_encoder or self.add_video_encoder or self.add_audio_encoder:
            raise NotImplementedError("the stand-in builds image_encoder + text_decoder only")
        self.img_context_token_id = config.img_context_token_id
        self.pp_size = mpu.get_pipeline_model_parallel_world_size()
        self.image_encoder = self.text_decoder = None
        self.share_embeddings_and_output_weights = not getattr(config.text_decoder,
                                                               'untie_embeddings_and_output_weights', True)
        if self.add_image_encoder:
            self.image_encoder = self._build_image_encoder_model(config.image_encoder)
        if self.add_text_decoder:
            self.text_decoder = self._build_text_decoder_model(config.text_decoder)

    def _build_image_encoder_model(self, config):
        return VisionModel(config=config, encoder_transformer_layer_spec=get_vit_layer_spec(config.vision_encoder),
                           projector_layer_spec=get_projector_layer_spec(config.vision_projector))

    def _build_text_decoder_model(self, config):
        return MMGPTModel(config=config, transformer_layer_spec=get_llm_layer_spec(config),
                          vocab_size=config.vocab_size, max_sequence_length=config.max_position_embeddings,
                          share_embeddings_and_output_weights=self.share_embeddings_and_output_weights,
                          pre_process=self.pre_process, post_process=self.post_process)

    def freeze(self, freeze_text_decoder: bool = False, freeze_image_encoder: bool = False,
               freeze_audio_encoder: bool = False, freeze_audio_projection: bool = False,
               freeze_image_projection: bool = False):
        if self.image_encoder is not None:
            self.image_encoder.freeze(freeze_image_encoder, freeze_image_projection)
        if freeze_text_decoder and self.text_decoder is not None:
            for param in self.text_decoder.parameters():
                param.requires_grad = False

    def forward(self, input_ids: torch.Tensor, pixel_values: Optional[torch.Tensor] = None,
                image_grid_thw: Optional[torch.Tensor] = None, attention_mask: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, *args, **kwargs):
        embeds = self.text_decoder.embedding.word_embeddings(input_ids)
        if self.add_image_encoder and pixel_values is not None:
            image = self.image_encoder(pixel_values, image_grid_thw).to(embeds.dtype)
            mask = input_ids == self.img_context_token_id
            if int(mask.sum()) != image.shape[0]:
                raise ValueError(f"Image features and image tokens do not match: tokens: {int(mask.sum())}, "
                                 f"features {image.shape[0]}")
            embeds = embeds.masked_scatter(mask.unsqueeze(-1), image)
        logits = self.text_decoder(embeds)
        if labels is None:
            return logits
        shift_logits, shift_labels = logits[:, :-1].float(), labels[:, 1:]
        loss = F.cross_entropy(shift_logits.reshape(-1, shift_logits.shape[-1]), shift_labels.reshape(-1),
                               ignore_index=-100)
        return {"loss_dict": {"loss": loss, "loss_mask": shift_labels > -1}, "logits": logits}
