"""TrainEngine: the iteration loop, rank-0 logging in the real format, DCP save/load, HF weights load."""
import logging
import os
import time
from datetime import datetime

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from mindspeed.fsdp.utils.log import print_rank
from mindspeed_mm.fsdp.checkpoint.hf_utils import load_hf_checkpoint
from mindspeed_mm.fsdp.loss.loss_func import build_loss_func
from mindspeed_mm.fsdp.utils.device import get_device_type, get_torch_device, memory_stats_mb
from mindspeed_mm.fsdp.utils.dtype import get_dtype

logger = logging.getLogger(__name__)


def move_to_device(batch, float_dtype):
    """Top-level tensors / lists of tensors / scalars survive; anything else (e.g. nested dicts) is dropped."""
    out, device = {}, get_device_type()
    for key, value in batch.items():
        if isinstance(value, torch.Tensor):
            value = value.to(device)
            out[key] = value.to(float_dtype) if (float_dtype and value.is_floating_point()) else value
        elif isinstance(value, list) and all(isinstance(v, torch.Tensor) for v in value):
            out[key] = [v.to(device) for v in value]
        elif value is None or isinstance(value, (bool, int, float, str)):
            out[key] = value
    return out


class TrainEngine:
    def __init__(self, args, model, optimizer, lr_scheduler, train_dataloader):
        self.args, self.model, self.optimizer = args, model, optimizer
        self.lr_scheduler, self.train_dataloader = lr_scheduler, train_dataloader
        self.iteration, self.consumed_train_samples = 0, 0
        self.loss_func = build_loss_func(args.features.loss_cfg.loss_type)
        if args.training.load:
            self.load()

    def _iterations(self):
        while True:
            for batch in self.train_dataloader:
                yield batch

    def train_step(self, data_iterator):
        ga = self.args.training.gradient_accumulation_steps
        dtype = get_dtype(self.args.parallel.fsdp_plan.param_dtype)
        total = torch.zeros((), device=get_device_type())
        for _ in range(ga):
            batch = move_to_device(next(data_iterator), dtype)
            if self.loss_func is not None:
                self.model.loss_function = self.loss_func
            output = self.model(**batch, use_cache=False)
            loss = output.loss / ga
            loss.backward()
            total += loss.detach().float()
        torch.distributed.all_reduce(total, op=torch.distributed.ReduceOp.AVG)
        return {"loss": total.item()}

    def train(self):
        args = self.args.training
        data_iterator = self._iterations()
        self.model.train()
        while self.iteration < args.train_iters:
            torch.distributed.barrier()
            start = time.time()
            loss_dict = self.train_step(data_iterator)
            params = [p for p in self.model.parameters() if p.grad is not None]
            grad_norm = torch.nn.utils.clip_grad_norm_(params, args.clip_grad if args.clip_grad > 0 else float("inf"),
                                                       foreach=args.clip_grad_foreach)
            if hasattr(grad_norm, "full_tensor"):
                grad_norm = grad_norm.full_tensor()
            lr = self.optimizer.param_groups[0]["lr"]
            self.optimizer.step()
            self.lr_scheduler.step()
            self.optimizer.zero_grad()
            self.iteration += 1
            self.consumed_train_samples += args.global_batch_size
            torch.distributed.barrier()
            if self.iteration % args.log_interval == 0:
                self.training_log(self.iteration, time.time() - start, lr, self.consumed_train_samples, loss_dict,
                                  grad_norm.item())
            if self.iteration == 2:
                self.report_memory(f"(after {self.iteration} iterations)")
            if args.save and self.iteration % args.save_interval == 0:
                self.save(self.iteration, self.consumed_train_samples)
        if args.save:
            self.save(self.iteration, self.consumed_train_samples)

    def training_log(self, iteration, elapsed, lr, consumed, loss_dict, grad_norm):
        log_string = f" [{datetime.now().strftime('%Y-%m-%d %H:%M:%S')}]"
        log_string += " iteration {:8d}/{:8d} |".format(iteration, self.args.training.train_iters)
        log_string += " consumed samples: {:12d} |".format(consumed)
        log_string += " elapsed time per iteration (ms): {:.1f} |".format(elapsed * 1000.0)
        log_string += " learning rate: {:.6E} |".format(lr)
        log_string += " global batch size: {:5d} |".format(self.args.training.global_batch_size)
        for name, value in loss_dict.items():
            log_string += f" {name}: {value:.6E} |"
        if grad_norm is not None:
            log_string += " grad norm: {:.3f} |".format(grad_norm)
        print_rank(logger.info, log_string)

    def report_memory(self, name):
        if torch.distributed.get_rank() != 0:
            return
        alloc, max_alloc, reserved, max_reserved = memory_stats_mb()
        print(f"[Rank {torch.distributed.get_rank()}] {name} memory (MB) | allocated: {alloc} | "
              f"max allocated: {max_alloc} | reserved: {reserved} | max reserved: {max_reserved}", flush=True)

    def _ckpt_dir(self, root, iteration):
        return os.path.join(root, "iter_{:07d}".format(iteration))

    def save(self, iteration, consumed):
        root = self.args.training.save
        path = self._ckpt_dir(root, iteration)
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
        state = {"model": model_sd}
        if not self.args.training.no_save_optim:
            state["optimizer"] = optim_sd
        dcp.save(state, checkpoint_id=path)
        rank = torch.distributed.get_rank()
        os.makedirs(os.path.join(path, "extra_state"), exist_ok=True)
        torch.save({"iteration": iteration, "consumed_train_samples": consumed,
                    "lr_scheduler": self.lr_scheduler.state_dict(), "torch_rng_state": torch.get_rng_state()},
                   os.path.join(path, "extra_state", f"extra_state_rank_{rank}.pt"))
        torch.distributed.barrier()
        if rank == 0:
            with open(os.path.join(root, "latest_checkpointed_iteration.txt"), "w") as f:
                f.write(str(iteration))
        if hasattr(get_torch_device(), "empty_cache"):  # torch.cpu has none (the real engine needs the CPU shim)
            get_torch_device().empty_cache()
        print_rank(logger.info, f"Saved checkpoint to {path}")

    def load(self):
        if self.args.training.load_format == "hf":  # model weights only, from an HF folder (iteration 0)
            load_hf_checkpoint(self.model, self.args.training.load, load_strict=self.args.training.load_strict)
            torch.distributed.barrier()
            return
        root = self.args.training.load
        with open(os.path.join(root, "latest_checkpointed_iteration.txt")) as f:
            tag = f.read().strip()
        release = tag == "release"
        path = os.path.join(root, "release") if release else self._ckpt_dir(root, int(tag))
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
        state = {"model": model_sd}
        load_optim = not (self.args.training.no_load_optim or release)
        if load_optim:
            state["optimizer"] = optim_sd
        dcp.load(state, checkpoint_id=path,
                 planner=dcp.DefaultLoadPlanner(allow_partial_load=not self.args.training.load_strict))
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"],
                       optim_state_dict=state.get("optimizer", optim_sd) if load_optim else optim_sd)
        if not release:
            extra = torch.load(os.path.join(path, "extra_state", f"extra_state_rank_{torch.distributed.get_rank()}.pt"),
                               weights_only=False)
            self.iteration, self.consumed_train_samples = extra["iteration"], extra["consumed_train_samples"]
            self.lr_scheduler.load_state_dict(extra["lr_scheduler"])
            if not self.args.training.no_load_rng:
                torch.set_rng_state(extra["torch_rng_state"])
        print_rank(logger.info, f"Loaded checkpoint from {path}")
