from pydantic import Field

from mindspeed_mm.config.arguments.base_args import BaseArguments
from mindspeed_mm.fsdp.params.data_args import DataArguments
from mindspeed_mm.fsdp.params.feature_args import FeatureArguments
from mindspeed_mm.fsdp.params.model_args import ModelArguments
from mindspeed_mm.fsdp.params.parallel_args import ParallelArguments
from mindspeed_mm.fsdp.params.tools_args import ToolsArguments
from mindspeed_mm.fsdp.params.training_args import TrainingArguments


class Arguments(BaseArguments):
    """Root of the six YAML sections."""
    parallel: ParallelArguments = Field(default_factory=ParallelArguments)
    model: ModelArguments = Field(default_factory=ModelArguments)
    data: DataArguments = Field(default_factory=DataArguments)
    training: TrainingArguments = Field(default_factory=TrainingArguments)
    tools: ToolsArguments = Field(default_factory=ToolsArguments)
    features: FeatureArguments = Field(default_factory=FeatureArguments)

    def model_post_init(self, __context):
        self.training.compute_distributed_training(self.parallel)
