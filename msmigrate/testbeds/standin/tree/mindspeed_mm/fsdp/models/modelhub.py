"""ModelHub.build: transformers path (AutoConfig loads) or custom path (BaseModel + ModelArguments)."""
import logging

import torch
import transformers
from accelerate import init_empty_weights

from mindspeed.fsdp.utils.log import print_rank
from mindspeed.fsdp.utils.str_match import module_name_match
from mindspeed_mm.fsdp.utils.register import model_register

logger = logging.getLogger(__name__)


class ModelHub:
    @staticmethod
    def build(model_args, feature_args, training_args):
        meta = bool(getattr(training_args, "init_model_with_meta_device", False))
        try:
            print_rank(logger.info, f"> Loading AutoConfig from {model_args.model_name_or_path}...")
            hf_config = transformers.AutoConfig.from_pretrained(
                model_args.model_name_or_path, trust_remote_code=model_args.trust_remote_code,
                _attn_implementation=model_args.attn_implementation)
        except Exception as e:  # any AutoConfig failure means "not a transformers folder"
            msg = str(e)[:200]
            print_rank(logger.warning, f"AutoConfig.from_pretrained failed for '{model_args.model_name_or_path}' "
                                       f"({type(e).__name__}: {msg}); falling back to custom model builder. "
                                       "If this is a transformers model, check model_name_or_path.")
            model = ModelHub._build_custom_model(model_args, meta)
        else:
            model = ModelHub._build_transformers_model(model_args, feature_args, hf_config, meta)
        ModelHub._freeze(model, model_args.freeze)
        return model

    @staticmethod
    def _build_transformers_model(model_args, feature_args, hf_config, meta):
        print_rank(logger.info, "Building transformers model from configuration...")
        if model_args.model_id:
            model_cls = model_register.get(model_args.model_id)
        else:
            archs = getattr(hf_config, "architectures", None) or []
            model_cls = getattr(transformers, archs[0], None) if archs else None
        if model_cls is None:
            raise ValueError("load model from config failed")
        if callable(getattr(model_cls, "overwrite_transformer_config", None)):
            hf_config = model_cls.overwrite_transformer_config(hf_config, model_args, feature_args)
        if meta:
            with init_empty_weights():
                model = model_cls._from_config(hf_config).float()
            for module in model.modules():
                module._is_hf_initialized = False
            return model
        return model_cls.from_pretrained(model_args.model_name_or_path, config=hf_config, dtype=torch.float32,
                                         low_cpu_mem_usage=True, device_map="cpu",
                                         trust_remote_code=model_args.trust_remote_code)

    @staticmethod
    def _build_custom_model(model_args, meta):
        print_rank(logger.info, "Building custom model...")
        if not model_args.model_id:
            raise ValueError("`model_id` must be provided in model_args when using custom models.")
        model_cls = model_register.get(model_args.model_id)
        if meta:
            with init_empty_weights():
                return model_cls._from_config(model_args).float()
        return model_cls.from_pretrained(model_args).float()

    @staticmethod
    def _freeze(model, patterns):
        for name, module in model.named_modules():
            if any(module_name_match(p, name) for p in patterns or []):
                print_rank(logger.info, f"freezing module {name}...")
                for param in module.parameters():
                    param.requires_grad_(False)
