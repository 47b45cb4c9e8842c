"""ParallelApplier: TP (must be 1) -> FSDP2 from fsdp_plan.apply_modules (post-order) or DDP fallback."""
import logging

from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

from mindspeed.fsdp.utils.log import print_rank
from mindspeed.fsdp.utils.str_match import module_name_match
from mindspeed_mm.fsdp.distributed.parallel_state import get_parallel_state
from mindspeed_mm.fsdp.utils.device import get_device_type, get_torch_device
from mindspeed_mm.fsdp.utils.dtype import get_dtype

logger = logging.getLogger(__name__)


def _post_order(module, prefix=""):
    for name, child in module.named_children():
        yield from _post_order(child, f"{prefix}.{name}" if prefix else name)
    yield prefix, module


def fully_shard_parallel_modules(model, fsdp_plan, training):
    ps = get_parallel_state()
    if ps.fsdp_size == 1 and not training.init_model_with_meta_device:
        dtype = get_dtype(fsdp_plan.param_dtype)
        if dtype is not None:
            for name, param in model.named_parameters():
                if "lora" not in name:
                    param.data = param.data.to(dtype)
        print_rank(logger.info, "DDP mode is enabled (fully_shard_parallel_size=1) instead of FSDP wrapping")
        return DDP(model.to(get_device_type()), process_group=ps.get_dp_group(), find_unused_parameters=True,
                   device_ids=[get_torch_device()])
    ignored = set()
    for name, module in model.named_modules():
        if any(module_name_match(p, name) for p in fsdp_plan.ignored_modules):
            ignored.update(module.parameters())
    mp = MixedPrecisionPolicy(param_dtype=get_dtype(fsdp_plan.param_dtype), reduce_dtype=get_dtype(fsdp_plan.reduce_dtype),
                              output_dtype=get_dtype(fsdp_plan.output_dtype),
                              cast_forward_inputs=fsdp_plan.cast_forward_inputs)
    kwargs = dict(mesh=ps.fsdp_mesh, reshard_after_forward=fsdp_plan.reshard_after_forward, mp_policy=mp,
                  ignored_params=ignored or None)
    matched = [(name, m) for name, m in _post_order(model)
               if name and any(module_name_match(p, name) for p in fsdp_plan.apply_modules)]
    if fsdp_plan.apply_modules and not matched:
        raise RuntimeError(f"[FSDP2] No module named {fsdp_plan.apply_modules}.")
    for _, module in matched:
        fully_shard(module, **kwargs)
    fully_shard(model, **kwargs)
    return model


class ParallelApplier:
    def __init__(self, parallel_args, training_args):
        self.parallel_args, self.training_args = parallel_args, training_args

    def __call__(self, model):
        if self.parallel_args.tensor_parallel_size != 1:
            raise NotImplementedError("Tensor parallel size not supported yet.")
        return fully_shard_parallel_modules(model, self.parallel_args.fsdp_plan, self.training_args)
