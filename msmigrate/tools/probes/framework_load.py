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


def merged_by_transformers(model, names):
    """transformers' own many-to-one conversions (its conversion mapping's ``WeightConverter`` entries that merge
    several checkpoint tensors, e.g. per-expert ``experts.*.gate_proj.weight`` + ``up_proj.weight`` into one fused
    ``experts.gate_up_proj``) whose target is among ``names``: [(source patterns, target pattern)]. A loader that maps
    one key to one name cannot fill those, whatever its renaming."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightConverter
    except ImportError:  # transformers 4.x: checkpoints hold the module layout
        return []
    upstream = next((c for c in type(model).__mro__ if c.__module__.startswith("transformers.models.")), None)
    if upstream is None:
        return []
    from accelerate import init_empty_weights

    with init_empty_weights():  # the registry skips classes defined outside transformers: ask the upstream class
        reference = upstream._from_config(model.config)
    found = []
    for conv in get_model_conversion_mapping(reference):
        if not isinstance(conv, WeightConverter) or not conv.operations:
            continue
        targets = [t for t in conv.target_patterns if any(t in n for n in names)]
        if targets and (list(conv.source_patterns), targets[0]) not in found:  # a mapping may list one twice
            found.append((list(conv.source_patterns), targets[0]))
    return found


def _shape(name):
    """A parameter name's last three parts, layer indices written as N: how a module's own parameter is named
    whatever the prefix the classes put before it."""
    import re

    return ".".join(re.sub(r"^\d+$", "N", p) for p in name.split(".")[-3:])


def not_in_source_class(model, names):
    """(the unfilled ``names`` no parameter of the source's own class is named like (``_shape``), that class's
    name): the upstream transformers class of the plugin, built on the meta device from the same config. ([], None)
    when there is no upstream class to ask or it does not build."""
    upstream = next((c for c in type(model).__mro__ if c.__module__.startswith("transformers.models.")), None)
    if upstream is None:
        return [], None
    from accelerate import init_empty_weights

    try:
        with init_empty_weights():
            reference = upstream._from_config(model.config)
    except Exception:  # probe boundary: an upstream class that does not build from this config answers nothing
        return [], None
    known = {_shape(n) for n, _ in reference.named_parameters()}
    return [n for n in names if _shape(n) not in known], upstream.__name__


def defined_in(cls):
    """The file defining ``cls``, relative to the working folder (the target root) when under it."""
    import inspect
    import os

    try:
        path = os.path.abspath(inspect.getsourcefile(cls) or "")
    except TypeError:
        return None
    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else path


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
        extra, upstream = not_in_source_class(model, names)
        if extra and len(extra) == len(names):
            # the source's own class builds nothing like them: modules the plugin adds, not a mapping of the keys
            result["not_in_source_class"] = extra[:20]
            where = defined_in(type(model))
            shapes = ", ".join(sorted({_shape(n) for n in extra})[:4])
            result["error"] += (f". The source's own class ({upstream}, built from the same config) has no parameter "
                                f"like them ({shapes}): the plugin class builds modules the source does not have"
                                + (f" (defined in {where})" if where else ""))
        merged = merged_by_transformers(model, names)
        if merged:
            result["merged_by_transformers"] = merged
            result["error"] += (". transformers builds them from several checkpoint tensors each (its conversion "
                                "mapping merges " + "; ".join(f"{' + '.join(src)} into {tgt}" for src, tgt in merged)
                                + "), and the target's loader maps one key to one name: the checkpoint needs "
                                "converting to the model's layout first (the plan writes one with the source's own "
                                "load where this runtime's transformers converts at load: see the run's "
                                "probes/checkpoint_conversion.json for why it did not here), or a weight transform "
                                "that merges them")
    emit(result)
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
