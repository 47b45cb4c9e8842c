from typing import List, Optional

from pydantic import Field

from mindspeed_mm.config.arguments.base_args import BaseArguments
from mindspeed_mm.fsdp.params.parallel_args import RecomputePlanConfig


class ChunkLossPlanConfig(BaseArguments):
    apply_module: str = "lm_head"
    chunk_size: int = 1024
    total_chunk_size: int = 4096


class LossArguments(BaseArguments):
    loss_type: Optional[str] = Field(default="raw", description="raw | default | per_sample_loss | per_token_loss")
    router_aux_loss_coef: float = 0.0
    router_aux_loss_offload: bool = False


class ActivationOffloadPlanConfig(BaseArguments):
    apply_modules: Optional[List[str]] = None


class ChunkMbsPlanConfig(BaseArguments):
    apply_modules: Optional[List[str]] = None
    chunk_mbs: int = 1
    batch_dim: int = 0
    chunk_arg_indexs: List[int] = Field(default_factory=lambda: [0])
    chunk_kwarg_names: List[str] = Field(default_factory=list)


class EPBalancePlanConfig(BaseArguments):
    max_dup_experts_num: int = 2


class FeatureArguments(BaseArguments):
    # NOTE: `recompute` is deliberately not declared (as in the real code): `features.recompute: true` arrives as
    # a dynamic YAML field and is read with getattr.
    recompute_plan: RecomputePlanConfig = Field(default_factory=RecomputePlanConfig)
    loss_cfg: LossArguments = Field(default_factory=LossArguments)
    enable_chunk_loss: bool = False
    enable_dynamic_chunk_loss: bool = False
    chunkloss_plan: ChunkLossPlanConfig = Field(default_factory=ChunkLossPlanConfig)
    enable_activation_offload: bool = False
    activation_offload_plan: ActivationOffloadPlanConfig = Field(default_factory=ActivationOffloadPlanConfig)
    enable_chunk_mbs: bool = False
    chunkmbs_plan: ChunkMbsPlanConfig = Field(default_factory=ChunkMbsPlanConfig)
    enable_ep_balance: bool = False
    ep_balance_plan: EPBalancePlanConfig = Field(default_factory=EPBalancePlanConfig)
    skip_moe_pad_tokens: bool = False
