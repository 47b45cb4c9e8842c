"""The stand-in's shared training loop ``pretrain`` (the real one is Megatron-LM's, patched by MindSpeed-MM).

It parses Megatron-style flags (an unknown flag is an argparse error, as in Megatron), merges the --mm-* JSON
files into ``args.mm``, initialises gloo when launched by torchrun, builds the model through model_provider,
loads a Megatron-layout checkpoint from --load (strict: every tensor must match by name and shape), trains with
AdamW and logs one Megatron-format line per iteration. TP, PP and CP must be 1 here: the stand-in has no model
parallelism (that needs the real route on an accelerator)."""
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

from megatron.training.arguments import parse_args
from megatron.training.global_vars import print_rank_0, set_args
from mindspeed_mm.configs.config import merge_mm_args

MEGATRON_CKPT_NAME = "model_optim_rng.pt"
LATEST_TXT = "latest_checkpointed_iteration.txt"


def _parse(extra_args_provider, args_defaults):
    args = parse_args(extra_args_provider)
    for k, v in (args_defaults or {}).items():
        setattr(args, k, v)
    sizes = (args.tensor_model_parallel_size, args.pipeline_model_parallel_size, args.context_parallel_size)
    if sizes != (1, 1, 1):
        raise SystemExit(f"the stand-in runs TP=PP=CP=1 only, got TP={sizes[0]} PP={sizes[1]} CP={sizes[2]}")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if args.global_batch_size is None:
        args.global_batch_size = args.micro_batch_size * world
    if args.global_batch_size % (args.micro_batch_size * world):
        raise SystemExit(f"global batch size ({args.global_batch_size}) is not divisible by micro batch size "
                         f"({args.micro_batch_size}) times data parallel size ({world})")
    args.grad_accum = args.global_batch_size // (args.micro_batch_size * world)
    args.params_dtype = torch.float32  # the CPU path trains in fp32; --bf16 is accepted and not applied
    args.consumed_train_samples = 0
    args.hetero_parallel = args.encoder_dp_balance = args.use_data_balance = False
    args.hetero_encoder_mbs_scale = 1
    merge_mm_args(args)
    return args


class _Wrapped(torch.nn.Module):
    """Stands for Megatron's Float16Module (and DDP on one rank): forward_step reaches model.module.module."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


def _load(model, load_dir):
    load_dir = Path(load_dir)
    tag = (load_dir / LATEST_TXT).read_text().strip()
    sub = tag if tag == "release" else f"iter_{int(tag):07d}"
    state = torch.load(load_dir / sub / "mp_rank_00" / MEGATRON_CKPT_NAME, map_location="cpu", weights_only=False)
    model.load_state_dict(state["model"], strict=True)
    print_rank_0(f"loaded checkpoint from {load_dir} at iteration {tag}")


def _save(model, save_dir, iteration):
    path = Path(save_dir) / f"iter_{iteration:07d}" / "mp_rank_00"
    path.mkdir(parents=True, exist_ok=True)
    torch.save({"model": model.state_dict(), "iteration": iteration}, path / MEGATRON_CKPT_NAME)
    (Path(save_dir) / LATEST_TXT).write_text(str(iteration))


def pretrain(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func,
             process_non_loss_data_func=None, extra_args_provider=None, args_defaults=None):
    args = _parse(extra_args_provider, args_defaults)
    set_args(args)
    if "WORLD_SIZE" in os.environ and not dist.is_initialized():
        dist.init_process_group("gloo")
    torch.manual_seed(args.seed)
    model = model_provider()
    if args.load:
        _load(model, args.load)
    wrapped = _Wrapped(model)
    wrapped = torch.nn.parallel.DistributedDataParallel(wrapped) if dist.is_initialized() else _Wrapped(wrapped)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(args.adam_beta1, args.adam_beta2),
                            weight_decay=args.weight_decay)
    train_iter, _, _ = train_valid_test_dataset_provider((args.train_iters * args.global_batch_size, 0, 0))
    for iteration in range(1, args.train_iters + 1):
        t0 = time.time()
        opt.zero_grad()
        reported = 0.0
        for _ in range(args.grad_accum):
            output, loss_fn = forward_step_func(train_iter, wrapped)
            loss, loss_dir = loss_fn(output)
            (loss.sum() / args.grad_accum).backward()
            reported += float(loss_dir["loss"]) / args.grad_accum
        grad_norm = torch.nn.utils.clip_grad_norm_(params, args.clip_grad) if args.clip_grad > 0 else 0.0
        opt.step()
        args.consumed_train_samples += args.global_batch_size
        if iteration % args.log_interval == 0:
            print_rank_0(f" iteration {iteration:8d}/{args.train_iters:8d} | consumed samples: "
                         f"{args.consumed_train_samples:12d} | elapsed time per iteration (ms): "
                         f"{(time.time() - t0) * 1000:.1f} | learning rate: {args.lr:.6E} | global batch size: "
                         f"{args.global_batch_size:5d} | loss: {reported:.6E} | grad norm: {float(grad_norm):.3f} |")
    if args.save and (not dist.is_initialized() or dist.get_rank() == 0):
        _save(model, args.save, args.train_iters)
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
