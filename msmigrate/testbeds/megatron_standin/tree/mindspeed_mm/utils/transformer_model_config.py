"""A sub-module's JSON block plus the global parallel sizes, the way Megatron's TransformerConfig carries them.
The real get_model_config builds a megatron.core TransformerConfig (which itself rejects heads not divisible by
TP); the stand-in keeps the ConfigReader and does that one check itself."""
from megatron.training import get_args

from mindspeed_mm.configs.config import ConfigReader


def get_model_config(config):
    args = get_args()
    cfg = ConfigReader(config.to_dict())
    cfg.tensor_model_parallel_size = args.tensor_model_parallel_size
    cfg.pipeline_model_parallel_size = args.pipeline_model_parallel_size
    cfg.context_parallel_size = getattr(config, "context_parallel_size", args.context_parallel_size)
    heads = getattr(cfg, "num_attention_heads", None)
    if heads is not None and heads % cfg.tensor_model_parallel_size:
        raise ValueError(f"num_attention_heads ({heads}) must be a multiple of tensor_model_parallel_size "
                         f"({cfg.tensor_model_parallel_size}).")
    return cfg
