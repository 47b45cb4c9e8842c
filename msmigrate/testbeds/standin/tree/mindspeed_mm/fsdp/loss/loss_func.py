"""features.loss_cfg.loss_type: raw (model's own .loss) or default (token-mean CE on shifted labels)."""
import torch.nn.functional as F

IGNORE_INDEX = -100


def default_loss_function(logits, labels, vocab_size=None, **kwargs):
    """Token mean over valid shifted labels; labels arrive unshifted (the framework shifts)."""
    if labels is None:
        raise ValueError("labels must be provided either in build_loss_func or in loss_func call.")
    logits = logits.float()
    shift_logits = logits[..., :-1, :].reshape(-1, logits.shape[-1])
    shift_labels = labels[..., 1:].reshape(-1).to(shift_logits.device)
    return F.cross_entropy(shift_logits, shift_labels, ignore_index=IGNORE_INDEX, reduction="mean")


def build_loss_func(loss_type):
    if loss_type in (None, "raw"):
        return None
    if loss_type == "default":
        return default_loss_function
    if loss_type == "per_token_loss":
        raise KeyError("per_token_loss must use PrefetchGradAccDataLoader")
    raise NotImplementedError(f"{loss_type} is not implemented!")
