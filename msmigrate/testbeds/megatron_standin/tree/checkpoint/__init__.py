from checkpoint.common.converter import Converter  # noqa: F401

# vlm model converter
from checkpoint.vlm_model.converters.qwen2_5vl import Qwen2_5_VLConverter  # noqa: F401
