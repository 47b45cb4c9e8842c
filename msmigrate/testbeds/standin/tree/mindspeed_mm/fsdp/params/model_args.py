from typing import List, Literal, Optional

from pydantic import Field

from mindspeed_mm.config.arguments.base_args import BaseArguments


class ModelArguments(BaseArguments):
    model_id: Optional[str] = Field(default=None, description="Registered model id (model_register).")
    model_name_or_path: Optional[str] = Field(default=None, description="Local HF folder or custom weights path.")
    trust_remote_code: bool = False
    attn_implementation: Literal["eager", "sdpa", "flash_attention_2", "flash_attention_3", "native-sparse"] = Field(
        default="flash_attention_2", description="Attention backend; use sdpa/eager off-NPU.")
    freeze: List[str] = Field(default_factory=list, description="Module-name patterns to freeze.")
    mtp_num_layers: int = 0
    mtp_loss_scaling_factor: float = 0.1
