"""Qwen3-VL (dense) on the plugin route: a thin subclass of the transformers class (Transformers path).

Meta-device init relies on the inherited transformers `init_weights()`: ModelHub marks every module as not
initialised, so after `to_empty_if_needed` (new storage for the parameters; the buffers keep their values) the
trainer's `init_model_weights` re-runs `_init_weights` on all modules.
"""
from transformers import Qwen3VLForConditionalGeneration as HFQwen3VLForConditionalGeneration

from mindspeed_mm.fsdp.utils.register import model_register


@model_register.register("qwen3_vl")
class Qwen3VLForConditionalGeneration(HFQwen3VLForConditionalGeneration):
    accepts_loss_kwargs = False  # the framework normalises the loss itself

    @classmethod
    def overwrite_transformer_config(cls, transformer_config, model_args, feature_args):
        """Hook called by ModelHub with (config, model args, feature args) before construction."""
        return transformer_config
