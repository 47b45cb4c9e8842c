"""Stand-in of MindSpeed-MM's Megatron VLM entry point: the five functions the shared loop ``pretrain`` calls
(model_provider, train_valid_test_datasets_provider, forward_step -> get_batch and loss_func), with the real
signatures and return shapes. CPU only; TP = PP = CP = 1 (the stand-in's pretrain refuses other sizes)."""
import os
from copy import deepcopy
from functools import partial

import torch

import mindspeed.megatron_adaptor  # noqa: F401  (imported first, as in the real entry)
from megatron.core import mpu
from megatron.core.enums import ModelType
from megatron.training import get_args, print_rank_0
from megatron.training.utils import average_losses_across_data_parallel_group
from mindspeed_mm.configs.config import mm_extra_args_provider
from mindspeed_mm.data import build_mm_dataloader, build_mm_dataset
from mindspeed_mm.data.data_utils.utils import build_iterations
from mindspeed_mm.models.vlm_model import VLMModel
from mindspeed_mm.training import pretrain
from mindspeed_mm.utils.transformer_model_config import get_model_config

os.environ.setdefault("USE_TF", "FALSE")


def model_provider(pre_process=True, post_process=True, modules=None):
    """Builds the model from args.mm.model: each listed sub-module's config goes through get_model_config."""
    if modules is None:
        modules = ['image_encoder', 'audio_encoder', 'text_decoder']
    print_rank_0("building VLMModel ...")
    vlm_config = deepcopy(get_args().mm.model)
    vlm_config.pre_process = pre_process
    vlm_config.post_process = post_process
    for name in ('image_encoder', 'audio_encoder', 'text_decoder'):
        if name not in modules or getattr(vlm_config, name, None) is None:
            setattr(vlm_config, name, None)
    if vlm_config.image_encoder is not None:
        vlm_config.image_encoder.vision_projector.context_parallel_size = 1  # a projector has no heads to split
        vlm_config.image_encoder.vision_encoder = get_model_config(vlm_config.image_encoder.vision_encoder)
        vlm_config.image_encoder.vision_projector = get_model_config(vlm_config.image_encoder.vision_projector)
    if vlm_config.text_decoder is not None:
        vlm_config.text_decoder = get_model_config(vlm_config.text_decoder)
    model = VLMModel(vlm_config)
    has_image = vlm_config.image_encoder is not None
    model.freeze(freeze_image_encoder=has_image and getattr(vlm_config.image_encoder.vision_encoder, 'freeze', True),
                 freeze_image_projection=has_image and getattr(vlm_config.image_encoder.vision_projector, 'freeze',
                                                               False))
    return model


def move_to_device(batch, float_dtype):
    for k, v in batch.items():
        if isinstance(v, torch.Tensor):
            batch[k] = v.to(dtype=float_dtype if torch.is_floating_point(v) else None)


def get_batch(data_iterator, is_vit_last_stage=False):
    """Generate a batch."""
    if data_iterator is None:
        raise ValueError("Data iterator is None. Unable to retrieve batch.")
    batch = next(data_iterator)
    move_to_device(batch, get_args().params_dtype)
    if 'pixel_values_videos' in batch and 'video_grid_thw' in batch:
        batch['pixel_values'] = batch.pop('pixel_values_videos')
        batch['image_grid_thw'] = batch.pop('video_grid_thw')
    batch['tranfer'] = None  # the real key name (sic); it carries encoder-balance state when that is on
    return batch


def loss_func(output_tensor):
    """Loss function: (loss scaled for CP, {"loss": averaged over data parallel})."""
    loss = output_tensor['loss_dict']['loss']
    averaged_loss = average_losses_across_data_parallel_group([loss])
    loss = loss.unsqueeze(0).clone()
    return loss / mpu.get_context_parallel_world_size(), {"loss": averaged_loss[0]}


def forward_step(data_iterator, model):
    """Forward step."""
    is_vit_last_stage = False
    if model.module.module.add_image_encoder:
        is_vit_last_stage = model.module.module.image_encoder.post_process
    output_tensor = model(**get_batch(data_iterator, is_vit_last_stage))
    return output_tensor, loss_func


def train_valid_test_datasets_provider(train_val_test_num_samples):
    """Build train, valid, and test datasets."""
    args = get_args()
    data_config = args.mm.data
    datasets = build_mm_dataset(data_config.dataset_param)
    build_dataloader = partial(build_mm_dataloader, dataloader_param=data_config.dataloader_param,
                               process_group=mpu.get_data_parallel_group(), dataset_param=data_config.dataset_param,
                               consumed_samples=args.consumed_train_samples)
    return build_iterations(build_dataloader(datasets))


if __name__ == "__main__":
    train_valid_test_datasets_provider.is_distributed = True
    pretrain(
        train_valid_test_datasets_provider,
        model_provider,
        ModelType.encoder_or_decoder,
        forward_step,
        extra_args_provider=mm_extra_args_provider,
        args_defaults={"dataloader_type": "external"},
    )
