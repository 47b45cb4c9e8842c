"""FeaturesApplier: features applied before sharding (recompute; other features are not in the stand-in)."""
import functools
import logging

from torch.utils.checkpoint import checkpoint

from mindspeed.fsdp.utils.log import print_rank
from mindspeed.fsdp.utils.str_match import module_name_match

logger = logging.getLogger(__name__)


def _wrap_recompute(module, use_reentrant):
    original = module.forward

    @functools.wraps(original)
    def forward(*args, **kwargs):
        kwargs["past_key_values"] = None  # always injected (the real wrapper does the same)
        return checkpoint(original, *args, use_reentrant=use_reentrant, **kwargs)

    module.forward = forward


class FeaturesApplier:
    def __init__(self, feature_args):
        self.args = feature_args

    def pre_fully_shard_apply(self, model):
        if getattr(self.args, "recompute", False):
            plan = self.args.recompute_plan
            matched = [(n, m) for n, m in model.named_modules() if any(module_name_match(p, n) for p in plan.apply_modules)]
            if not matched:
                raise RuntimeError(f"[Recompute] No module named {plan.apply_modules}.")
            for name, module in matched:
                print_rank(logger.info, f"Applying recompute to module: {name}")
                _wrap_recompute(module, plan.use_reentrant)
        return model

    def post_fully_shard_apply(self, model):
        return model
