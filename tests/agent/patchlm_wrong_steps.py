"""Deliberately wrong patchlm training steps (the right one: msmigrate/testbeds/fixtures/source_steps/patchlm_step.py),
each a mistake a user's own loop makes: G4's training parity must fail against them naming the cause. Run by the
probe in the target runtime: plain PyTorch, nothing from msmigrate."""
import torch.nn.functional as F

FORWARD_KEYS = ("input_ids", "attention_mask", "image_patches")


def _logits(model, batch):
    return model(**{k: batch[k] for k in FORWARD_KEYS if batch.get(k) is not None})["logits"]


def loss_doubled(model, batch):
    """The right loss ×2 (a loss summed over two terms that were meant to be averaged)."""
    logits = _logits(model, batch)
    return 2 * F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                               batch["labels"][:, 1:].reshape(-1), ignore_index=-100)


def labels_unshifted(model, batch):
    """Logits at t against the label at t: every position is trained on its own input token."""
    logits = _logits(model, batch)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), batch["labels"].reshape(-1),
                           ignore_index=-100)
