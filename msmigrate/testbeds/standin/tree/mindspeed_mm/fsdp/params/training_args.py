import os
from typing import Any, Dict, List, Literal, Optional, Union

from pydantic import Field

from mindspeed_mm.config.arguments.base_args import BaseArguments


class LoraArguments(BaseArguments):
    enable: bool = False
    rank: int = 8
    alpha: int = 16
    target_modules: List[str] = Field(default_factory=lambda: ["q_proj", "k_proj", "v_proj"])
    dropout: float = 0.0
    init_lora_weights: Union[bool, Literal["gaussian", "pissa", "olora", "loftq"]] = True
    pretrained_lora_path: Optional[str] = None


class LrScalingRule(BaseArguments):
    match: str
    scale: float = 1.0


class TrainingArguments(BaseArguments):
    # optimisation
    lr: float = Field(default=5e-5, description="Peak learning rate.")
    lr_min: float = 0.0
    lr_start: float = 0.0
    weight_decay: float = 0.0
    optimizer: Literal["adamw", "adamw_swap", "muon"] = "adamw"
    adam_fused: bool = Field(default=True, description="Fused AdamW (set false on CPU).")
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    clip_grad: float = Field(default=1.0, description="Gradient clip norm; 0 = compute the norm only.")
    clip_grad_foreach: bool = True
    lr_warmup_ratio: float = 0.0
    lr_decay_style: str = "constant"
    lr_decay_ratio: float = 1.0
    lr_scaling_plan: Optional[List[LrScalingRule]] = None
    # batching / iterations
    micro_batch_size: int = 1
    gradient_accumulation_steps: Optional[int] = None
    train_iters: int = 10000
    train_epochs: Optional[int] = None
    seed: int = 42
    log_interval: int = 1
    manual_gc_interval: int = 0
    use_deter_comp: bool = False
    allow_hf32: Optional[bool] = None
    # init / checkpoint
    init_model_with_meta_device: bool = False
    load: Optional[str] = None
    load_format: Literal["auto", "hf", "dcp"] = "auto"
    save_format: Literal["auto", "hf", "dcp"] = "auto"
    load_strict: bool = False
    load_rank0_and_broadcast: bool = False
    no_load_optim: bool = False
    no_load_rng: bool = False
    save: Optional[str] = None
    no_save_optim: bool = False
    no_save_rng: bool = False
    save_interval: int = 1
    save_async: bool = False
    save_ckpt_dtype: Optional[Literal["fp32", "fp16", "bf16"]] = None
    # validation
    val_interval: int = 0
    val_micro_batch_size: Optional[int] = None
    # plugins imported before the model is built
    plugin: List[str] = Field(default_factory=list, description="Plugin packages/modules (slashes or dots).")
    lora: LoraArguments = Field(default_factory=LoraArguments)
    quantization_plan: Dict[str, Any] = Field(default_factory=dict)

    def model_post_init(self, __context):
        self.local_rank = int(os.environ.get("LOCAL_RANK"))
        self.global_rank = int(os.environ.get("RANK"))
        self.world_size = int(os.environ.get("WORLD_SIZE"))
        if self.lr < self.lr_start:
            raise ValueError(f"Learning rate {self.lr} < starting lr {self.lr_start}. Check scheduler configuration.")
        if self.lr < self.lr_min:
            raise ValueError(f"Learning rate {self.lr} < minimum lr {self.lr_min}. Check scheduler configuration.")
        if self.manual_gc_interval < 0:
            raise ValueError(f"`manual_gc_interval` must be a non-negative integer, got {self.manual_gc_interval}.")

    def compute_distributed_training(self, parallel):
        if self.gradient_accumulation_steps is None:
            self.gradient_accumulation_steps = 1
        self.global_batch_size = self.micro_batch_size * parallel.data_parallel_size * self.gradient_accumulation_steps
