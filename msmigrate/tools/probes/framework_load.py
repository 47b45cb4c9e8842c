"""Probe (G1): the framework's own Hugging Face weight load on the plugin class, as the delivered config triggers it.

    python framework_load.py --target <root> --plugin <entry> --model-id <id> --model-name-or-path <dir>
                             --load <hf folder> [--load-strict] [--load-rank0-and-broadcast] [--trust-remote-code]

A config with ``init_model_with_meta_device`` and an HF ``training.load`` makes the trainer build the model on the
meta device, give it storage (the target's ``to_empty_if_needed``) and hand it to the target's own HF loader with the
config's load settings. That loader is the target's code, not this project's: how it maps checkpoint keys onto the
model (the class's ``_checkpoint_conversion_mapping``, or whatever the release reads) and what it raises are its own,
so G1 calls exactly the function the trainer calls — ``HuggingFaceCheckpointer.load`` where the target has it, else
its ``hf_utils`` entry — on the full (unshrunk) config, since the folder holds full-size tensors.

Storage is NaN-filled before the load, so a parameter the loader did not write stays non-finite after it (the
framework only warns about those unless ``load_strict``). Result: ``loader`` (the function called), ``load``,
``load_strict``, ``parameters``, ``unfilled`` (parameters still non-finite, first 20), ``unfilled_count``,
``error`` (the loader's exception with where it was raised, or what it left unfilled).
"""
import sys
import time

from _model_build import emit, error_with_place, parse, resolve


def extra_args(ap):
    ap.add_argument("--load", required=True, help="the HF folder the config's training.load names")
    ap.add_argument("--load-strict", action="store_true")
    ap.add_argument("--load-rank0-and-broadcast", action="store_true")


def trainer_loader(args):
    """(name, call(model)) of the HF load the target's trainer runs for ``load_format`` hf."""
    try:
        from mindspeed_mm.fsdp.checkpoint.hf_checkpointer import HuggingFaceCheckpointer
    except ImportError:
        HuggingFaceCheckpointer = None
    if HuggingFaceCheckpointer is not None:  # the train engine's load(): its checkpointer with the config's settings
        def call(model):
            HuggingFaceCheckpointer.load(path=args.load, state={"model": model, "extra_state": {}},
                                         load_rank0_and_broadcast=args.load_rank0_and_broadcast,
                                         load_strict=args.load_strict, enable_lora=False, model_id=args.model_id)
        return "HuggingFaceCheckpointer.load", call
    from mindspeed_mm.fsdp.checkpoint import hf_utils

    if hasattr(hf_utils, "load_hf_checkpoint"):
        return "hf_utils.load_hf_checkpoint", lambda model: hf_utils.load_hf_checkpoint(
            model, args.load, load_strict=args.load_strict)
    return "hf_utils.load_hf_weights", lambda model: hf_utils.load_hf_weights(
        model, args.load, load_strict=args.load_strict)


def main(argv):
    args = parse(argv, extra_args)
    start = time.monotonic()
    result = {"load": args.load, "load_strict": args.load_strict, "loader": None}
    try:
        import torch
        from _meta_init import build, materialize, retie

        cls, config, _ = resolve(args)
        result["model_class"] = f"{cls.__module__}.{cls.__qualname__}"
        model = build(cls, config, meta=True)
        result["materialize"] = materialize(model)
        with torch.no_grad():
            for param in model.parameters():
                param.fill_(float("nan"))
        result["loader"], call = trainer_loader(args)
        call(model)
        retie(model)
        names = [n for n, p in model.named_parameters() if not bool(torch.isfinite(p).all())]
    except Exception as exc:  # probe boundary: the loader's failure is the result
        result.update(error=error_with_place(exc), seconds=round(time.monotonic() - start, 2))
        emit(result)
        return 1
    result.update(parameters=sum(1 for _ in model.parameters()), unfilled=names[:20], unfilled_count=len(names),
                  seconds=round(time.monotonic() - start, 2))
    if names:
        result["error"] = (f"{result['loader']} left {len(names)} parameter(s) of {type(model).__name__} unwritten "
                           f"from {args.load} (e.g. {', '.join(names[:3])}): the checkpoint's keys do not reach "
                           f"those names through the loader's key mapping; the trainer would train them from "
                           f"uninitialised memory")
    emit(result)
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
