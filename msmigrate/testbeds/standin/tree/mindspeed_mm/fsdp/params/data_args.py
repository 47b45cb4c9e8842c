from typing import Optional

from pydantic import Field

from mindspeed_mm.config.arguments.base_args import BaseArguments
from mindspeed_mm.fsdp.data.data_utils.func_utils.convert import DataArguments as BasicDataArguments
from mindspeed_mm.fsdp.data.data_utils.func_utils.convert import DatasetAttr
from mindspeed_mm.fsdp.data.data_utils.func_utils.model_args import ProcessorArguments


class DataSetArguments(BaseArguments):
    dataset_type: str = Field(description="Registered dataset id (data_register).")
    basic_parameters: BasicDataArguments = Field(default_factory=BasicDataArguments)
    preprocess_parameters: Optional[ProcessorArguments] = Field(default_factory=ProcessorArguments)
    attr: DatasetAttr = Field(default_factory=DatasetAttr)


class CollateArguments(BaseArguments):
    collator_id: Optional[str] = Field(default=None, description="Registered data collator id.")
    model_name: Optional[str] = Field(default=None, description="Deprecated alias of collator_id.")
    ignore_pad_token_for_loss: bool = False
    pad_to_multiple_of: int = 8


class DataloaderArguments(BaseArguments):
    dataloader_mode: str = Field(description="sampler | base")
    sampler_type: str = Field(description="BaseRandomBatchSampler")
    shuffle: Optional[bool] = Field(description="Shuffle samples.")
    drop_last: bool = Field(description="Must be true with BaseRandomBatchSampler.")
    pin_memory: bool = Field(description="Pin host memory.")
    collate_param: CollateArguments = Field(default_factory=CollateArguments)
    num_workers: int = 2
    enable_preload: bool = False


class DataArguments(BaseArguments):
    dataset_param: DataSetArguments = Field(default_factory=DataSetArguments)
    val_dataset_param: Optional[DataSetArguments] = None
    dataloader_param: DataloaderArguments = Field(default_factory=DataloaderArguments)
