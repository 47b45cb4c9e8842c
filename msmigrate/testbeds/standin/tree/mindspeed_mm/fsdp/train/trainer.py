"""Plugin-route entry: `torchrun --nproc_per_node N mindspeed_mm/fsdp/train/trainer.py CONFIG.yaml`
(with NON_MEGATRON=true, run from the repo root)."""
import logging
import os

import torch

from mindspeed.fsdp.utils.log import print_rank, set_log_level
from mindspeed_mm.config.config_manager import ConfigManager
from mindspeed_mm.fsdp.checkpoint.hf_utils import looks_like_hf_weight_dir
from mindspeed_mm.fsdp.checkpoint.utils import retie_embeddings
from mindspeed_mm.fsdp.data import build_mm_dataloader, build_mm_dataset
from mindspeed_mm.fsdp.distributed.parallel_state import get_parallel_state, init_parallel_state
from mindspeed_mm.fsdp.distributed.torch_parallelize import ParallelApplier
from mindspeed_mm.fsdp.features.apply_features import FeaturesApplier
from mindspeed_mm.fsdp.models.modelhub import ModelHub
from mindspeed_mm.fsdp.params.argument import Arguments
from mindspeed_mm.fsdp.train.train_engine import TrainEngine
from mindspeed_mm.fsdp.utils.device import (get_device_type, get_dist_comm_backend, get_torch_device,
                                            set_accelerator_compatible)
from mindspeed_mm.fsdp.utils.random import set_seed
from mindspeed_mm.fsdp.utils.utils import init_model_weights, to_empty_if_needed
from mindspeed_mm.fsdp.utils.register import import_plugin

logger = logging.getLogger(__name__)


class Trainer:
    def __init__(self, args: Arguments, model_provider=None, dataloader_provider=None):
        self.args = args
        self.initialize()
        self.resolve_load_format()
        self.parallel_applier = ParallelApplier(args.parallel, args.training)
        self.features_applier = FeaturesApplier(args.features)
        self.model = model_provider() if model_provider else self.get_model()
        self.optimizer = self.get_optimizer()
        dataloader = dataloader_provider(args) if dataloader_provider else self.get_dataloader()
        self.train_dataloader = dataloader[0] if isinstance(dataloader, tuple) else dataloader
        self.lr_scheduler = self.get_scheduler()
        self.trainer = TrainEngine(args, self.model, self.optimizer, self.lr_scheduler, self.train_dataloader)

    def initialize(self):
        args = self.args
        print_rank(logger.info, "Start initializing training environment!!!")  # lost: logging not configured yet
        set_accelerator_compatible(get_torch_device())
        set_log_level()
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.accelerator.set_device_index(local_rank)
        set_seed(args.training.seed, set_deterministic=args.training.use_deter_comp)
        import_plugin(getattr(args.training, "plugin", []))
        if not torch.distributed.is_initialized():
            torch.distributed.init_process_group(
                backend=get_dist_comm_backend(cpu=args.parallel.fsdp_plan.cpu_offload),
                device_id=torch.device(f"{get_device_type()}:{local_rank}"))
        init_parallel_state(**args.parallel.to_dict())

    def resolve_load_format(self):
        """``load_format: auto`` becomes ``hf`` for a folder of safetensors weights, else ``dcp``; an HF load restores
        weights only, so it needs both no_load_optim and no_load_rng (the real trainer refuses it otherwise)."""
        t = self.args.training
        if t.load_format == "auto":
            t.load_format = "hf" if looks_like_hf_weight_dir(t.load) else "dcp"
        if t.load and t.load_format == "hf" and (not t.no_load_optim or not t.no_load_rng):
            raise ValueError(
                "HF checkpoint loading only restores model weights. Please set both "
                "no_load_optim=True and no_load_rng=True when load_format is 'hf'."
            )

    def get_model(self):
        args = self.args
        model = ModelHub.build(args.model, args.features, args.training)
        model = self.features_applier.pre_fully_shard_apply(model)
        model = self.parallel_applier(model)
        model = self.features_applier.post_fully_shard_apply(model)
        if args.training.init_model_with_meta_device:
            # parameters get fresh storage, buffers keep their values (a to_empty override never runs)
            to_empty_if_needed(model, device=get_device_type())
            if args.training.load is None:
                init_model_weights(model)
        retie_embeddings(model)  # the materialisation split a tied pair; the real trainer re-ties here too
        return model

    def get_optimizer(self):
        t = self.args.training
        params = [p for p in self.model.parameters() if p.requires_grad]
        return torch.optim.AdamW(params, lr=t.lr, betas=(t.adam_beta1, t.adam_beta2), eps=t.adam_eps,
                                 weight_decay=t.weight_decay, fused=t.adam_fused or None)

    def get_dataloader(self):
        args = self.args
        print_rank(logger.info, "Prepare data")
        dataset = build_mm_dataset(args.data.dataset_param)
        param = {**args.data.dataloader_param.to_dict(), "batch_size": args.training.micro_batch_size,
                 "seed": args.training.seed}
        return build_mm_dataloader(dataset, param, process_group=get_parallel_state().get_dp_group(),
                                   dataset_param=args.data.dataset_param, model=self.model)

    def get_scheduler(self):
        t = self.args.training
        style, total = t.lr_decay_style, max(1, t.train_iters)
        warmup = int(t.lr_warmup_ratio * total)
        if style not in ("constant", "linear", "cosine"):
            raise ValueError(f"Unknown learning rate decay style: {style}.")

        def factor(step):
            if step < warmup:
                return (step + 1) / (warmup + 1)
            if style == "constant":
                return 1.0
            progress = min(1.0, (step - warmup) / max(1, total - warmup))
            decayed = (1 - progress) if style == "linear" else 0.5 * (1 + torch.cos(torch.tensor(progress * 3.141592653589793)).item())
            return (t.lr_min + (t.lr - t.lr_min) * decayed) / t.lr

        return torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)

    def train(self):
        self.trainer.train()


if __name__ == "__main__":
    arguments = ConfigManager(config_class=Arguments).load_and_parse()
    trainer = Trainer(args=arguments)
    trainer.train()
