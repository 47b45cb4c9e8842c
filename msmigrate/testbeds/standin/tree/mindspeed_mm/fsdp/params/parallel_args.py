import os
from typing import List, Literal, Optional, Union

from pydantic import Field

from mindspeed_mm.config.arguments.base_args import BaseArguments


class FSDPPlanConfig(BaseArguments):
    ignored_modules: List[str] = Field(default_factory=list, description="Modules whose params FSDP ignores.")
    apply_modules: List[str] = Field(default_factory=list, description="Module-name patterns wrapped by fully_shard.")
    param_dtype: Optional[str] = Field(default=None, description="Mixed-precision param dtype (fp32/bf16/...).")
    reduce_dtype: Optional[str] = Field(default=None, description="Gradient reduce dtype.")
    output_dtype: Optional[str] = Field(default=None, description="Output dtype.")
    cast_forward_inputs: bool = True
    reshard_after_forward: bool = True
    num_to_forward_prefetch: Optional[int] = 0
    num_to_backward_prefetch: Optional[int] = 0
    pregather: bool = False
    hook_modules: Optional[List[str]] = None
    cpu_offload: bool = False


class TPPlanConfig(BaseArguments):
    colwise_parallel: List[str] = Field(default_factory=list)
    rowwise_parallel: List[str] = Field(default_factory=list)
    sequence_parallel: List[str] = Field(default_factory=list)


class EPPlanConfig(BaseArguments):
    apply_modules: List[str] = Field(default_factory=list)
    use_npu_fused_ops: bool = True
    dispatcher: Literal["alltoall", "allgather", "mc2"] = "alltoall"
    apply_efsdp_modules: List[str] = Field(default_factory=list)


class RecomputePlanConfig(BaseArguments):
    apply_modules: List[str] = Field(default_factory=list)
    use_reentrant: bool = False


class ParallelArguments(BaseArguments):
    data_parallel_size: Optional[int] = None
    fully_shard_parallel_size: Union[str, int] = "auto"
    fsdp_plan: FSDPPlanConfig = Field(default_factory=FSDPPlanConfig)
    tensor_parallel_size: int = 1
    tp_plan: TPPlanConfig = Field(default_factory=TPPlanConfig)
    ring_attention_size: int = 1
    ulysses_parallel_size: int = 1
    expert_parallel_size: int = 1
    expert_fully_shard_parallel_size: Optional[int] = None
    ep_plan: EPPlanConfig = Field(default_factory=EPPlanConfig)
    recompute: bool = False
    recompute_plan: RecomputePlanConfig = Field(default_factory=RecomputePlanConfig)

    def model_post_init(self, __context):
        # Read from the launcher's environment during parsing (fails outside torchrun, like the real one).
        self.local_rank = int(os.environ.get("LOCAL_RANK"))
        self.global_rank = int(os.environ.get("RANK"))
        self.world_size = int(os.environ.get("WORLD_SIZE"))
        if self.tensor_parallel_size != 1:
            raise ValueError("Tensor parallel size not supported yet.")
        cp = self.ring_attention_size * self.ulysses_parallel_size
        if self.world_size % (self.tensor_parallel_size * cp) != 0:
            raise ValueError(
                f"World size should be a multiple of tensor_parallel_size: {self.tensor_parallel_size}, "
                f"ulysses_parallel_size: {self.ulysses_parallel_size}, ring_attention_size: {self.ring_attention_size}.")
        derived = self.world_size // (self.tensor_parallel_size * cp)
        if self.data_parallel_size is not None and self.data_parallel_size != derived:
            raise ValueError(f"data_parallel_size should be equal to tensor_parallel_size: {self.tensor_parallel_size}, "
                             f"ulysses_parallel_size: {self.ulysses_parallel_size}, "
                             f"ring_attention_size: {self.ring_attention_size}.")
        self.data_parallel_size = derived
        if self.fully_shard_parallel_size == "auto":
            self.fully_shard_parallel_size = self.world_size // self.tensor_parallel_size
        if int(self.fully_shard_parallel_size) < cp:
            raise ValueError("fully shard parallel size should be greater the ring_attention_size * ulysses_parallel_size.")
