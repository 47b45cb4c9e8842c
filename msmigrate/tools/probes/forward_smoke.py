"""Probe: one forward with labels on a (shrunk) model -> is there a finite ``.loss``?

    python forward_smoke.py --model <hf folder> [--trust-remote-code] [--shrink-layers 2] [--weights]
                            [--batch <file.json|file.pt>] [--seq-len 16] [--seed 0]
    python forward_smoke.py --target <root> --plugin <entry> ... --model-id <id> --model-name-or-path <dir> ...

Default: random init from the config with layer counts capped at ``--shrink-layers``; ``--weights`` loads the
folder's weights instead (no shrink). Without ``--batch`` a synthetic text-only batch is used (input_ids,
attention_mask, labels = input_ids; ``mm_token_type_ids`` zeros when the forward takes it). The forward is called
like the trainer's engine calls it: ``model(**batch, use_cache=False)``.

Result: ``loss``, ``finite``, ``has_loss_attr`` (the engine reads ``output.loss``), ``output_type``, ``output_keys``,
``forward_params`` + ``accepts_var_kwargs`` (what a collated batch may carry), ``batch_keys``, ``model_class``.
"""
import json
import math
import sys
import time

from _model_build import emit, forward_params, instantiate, parse, resolve, shrink_config


def extra_args(ap):
    ap.add_argument("--shrink-layers", type=int, default=2)
    ap.add_argument("--weights", action="store_true", help="load the folder's weights (from_pretrained)")
    ap.add_argument("--batch", help="JSON (lists) or torch .pt (dict of tensors) batch file")
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)


def vocab_size(config):
    for cfg in (config, getattr(config, "text_config", None), getattr(config, "llm_config", None)):
        size = getattr(cfg, "vocab_size", None) if cfg is not None else None
        if isinstance(size, int) and size > 0:
            return size
    return 32


def load_batch(path):
    import torch

    if path.endswith(".pt"):
        return torch.load(path, weights_only=True)
    with open(path, encoding="utf-8") as fh:
        raw = json.load(fh)
    return {k: torch.tensor(v) if isinstance(v, list) else v for k, v in raw.items()}


def synthetic_batch(config, params, seq_len, seed):
    import torch

    gen = torch.Generator().manual_seed(seed)
    # stay clear of special ids at the top of the vocabulary (image/video tokens) so a text-only batch stays text
    high = max(4, min(vocab_size(config), 1000) - 8)
    ids = torch.randint(3, high, (1, seq_len), generator=gen)
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}
    if "mm_token_type_ids" in params:
        batch["mm_token_type_ids"] = torch.zeros_like(ids)
    return batch


def main(argv):
    args = parse(argv, extra_args)
    start = time.monotonic()
    try:
        import torch

        torch.manual_seed(args.seed)
        cls, config, how = resolve(args)
        if args.weights and how == "transformers":
            model = cls.from_pretrained(args.model or args.model_name_or_path, config=config, dtype=torch.float32,
                                        trust_remote_code=args.trust_remote_code).float()
        else:
            if args.shrink_layers and how == "transformers":
                shrink_config(config, args.shrink_layers)
            model = instantiate(cls, config, meta=False)
        params, var_kw = forward_params(type(model))
        batch = load_batch(args.batch) if args.batch else synthetic_batch(config, params, args.seq_len, args.seed)
        model.train()
        output = model(**batch, use_cache=False)
    except Exception as exc:  # probe boundary: the failure is the result
        emit({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    loss = getattr(output, "loss", None)
    value = float(loss.detach().float()) if loss is not None and hasattr(loss, "detach") else None
    keys = list(output.keys()) if hasattr(output, "keys") else []
    result = {
        "loss": value, "finite": value is not None and math.isfinite(value), "has_loss_attr": loss is not None,
        "output_type": type(output).__name__, "output_keys": keys, "forward_params": params,
        "accepts_var_kwargs": var_kw, "batch_keys": sorted(batch), "model_class": f"{cls.__module__}.{cls.__qualname__}",
        "build": how, "seconds": round(time.monotonic() - start, 2),
    }
    if loss is None:
        result["error"] = f"forward returned {type(output).__name__} without a .loss (the engine reads output.loss)"
    elif not result["finite"]:
        result["error"] = f"loss is not finite: {value}"
    emit(result)
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
