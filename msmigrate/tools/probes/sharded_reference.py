"""Probe (gate G6, sharded parity): the single-process loss on the global batch that a ``--nproc``-rank run trains on
at its first step, computed without sharding. Runs in the target runtime; imports nothing from msmigrate.

    python sharded_reference.py --target <root> --config <the distributed launch's per-run yaml> --nproc 2

Built from the framework's own pieces, as its trainer builds them in one process: the config (ConfigManager), the
plugins, ``ModelHub.build`` (same weights as the launch: ``from_pretrained`` of ``model_name_or_path``, then the
HF folder of ``training.load`` read by the framework's own loader when the run loads one), the dataset
and collator, and the target's ``build_mm_dataloader`` with ``batch_size = micro_batch_size * nproc`` on one rank —
its first batch is the set of samples the ranks of the distributed run share out at step 1 (whatever the sampler's
shuffle: it is the same permutation cut the same way). With ``micro_batch_size`` 1 each rank gets one of them, so
the run's step-1 loss — the per-rank ``output.loss`` averaged over the data-parallel group, as the engine logs it —
is the mean of the per-sample losses here, whatever the ranks' order. The engine's loss function
(``features.loss_cfg``) is set the way the engine sets it. Eval mode: dropout is off here, so a model with dropout
cannot be compared (reported as ``comparable: false``).

Result: ``loss`` (the reference), ``per_sample``, ``indices``, ``comparable`` + ``why_not``.
"""
import argparse
import inspect
import os
import sys


def emit(payload):
    import json

    print("MSMIGRATE_PROBE_RESULT " + json.dumps(payload, default=str), flush=True)


def not_comparable(why, **extra):
    emit({"comparable": False, "why_not": why, **extra})
    return 0


def dropout_modules(model):
    """Dropout modules with p > 0, and config entries (``attention_dropout`` …) above 0, sub-configs included."""
    import torch

    found = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Dropout) and m.p > 0]

    def scan(data, prefix):
        for key, value in data.items():
            if isinstance(value, dict):
                scan(value, f"{prefix}{key}.")
            elif "dropout" in str(key) and isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                found.append(f"config {prefix}{key}={value}")

    config = getattr(model, "config", None)
    if hasattr(config, "to_dict"):
        scan(config.to_dict(), "")
    return found


def engine_loss_func(cfg, batch):
    """The loss function the engine puts on the model for this batch (None for loss_type raw)."""
    features = getattr(cfg, "features", None)
    loss_type = getattr(getattr(features, "loss_cfg", None), "loss_type", "raw")
    if loss_type in (None, "raw"):
        return None
    from mindspeed_mm.fsdp.loss.loss_func import build_loss_func

    params = inspect.signature(build_loss_func).parameters
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        chunk = getattr(getattr(features, "chunkloss_plan", None), "chunk_size", None) \
            if getattr(features, "enable_chunk_loss", False) else None
        return build_loss_func(loss_type, chunk_size=chunk, **batch)
    return build_loss_func(loss_type)


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--nproc", type=int, default=2)
    args = ap.parse_args(argv)
    target = os.path.abspath(args.target)
    os.environ.setdefault("NON_MEGATRON", "true")
    os.chdir(target)
    sys.path.insert(0, target)
    try:
        import torch
        from _single_rank import start_single_rank
        from data_check import load_pipeline

        start_single_rank()
        cfg, dataset, collate_fn = load_pipeline(args.config)
        training = cfg.training
        mbs = getattr(training, "micro_batch_size", 1) or 1
        ga = getattr(training, "gradient_accumulation_steps", 1) or 1
        if mbs != 1 or ga != 1:
            return not_comparable(f"micro_batch_size {mbs}, gradient_accumulation_steps {ga}: the per-rank split of "
                                  "the global batch is the sampler's business (compared only at 1 and 1)")
        meta, load = getattr(training, "init_model_with_meta_device", False), getattr(training, "load", None)
        if meta and not load:
            return not_comparable("meta-device init without training.load: the run's weights are a random init on "
                                  "sharded storage, which one process cannot reproduce")
        hf_load = None
        if meta:
            from mindspeed_mm.fsdp.checkpoint.hf_utils import load_hf_weights, looks_like_hf_weight_dir

            if getattr(training, "load_format", "auto") not in ("auto", "hf") or not looks_like_hf_weight_dir(load):
                return not_comparable("meta-device init + a DCP training.load: the reference would need the "
                                      "sharded checkpoint")
            hf_load = load
            training.init_model_with_meta_device = False  # eager build; the run's weights come from the load
        torch.manual_seed(getattr(training, "seed", 0) or 0)
        from mindspeed_mm.fsdp.models.modelhub import ModelHub

        model = ModelHub.build(cfg.model, cfg.features, training)
        if hf_load:  # the same HF folder the run loaded, by the framework's own loader (unsharded tensors)
            load_hf_weights(model, hf_load)
        from mindspeed_mm.fsdp.data import build_mm_dataloader
        from mindspeed_mm.fsdp.distributed.parallel_state import get_parallel_state

        param = cfg.data.dataloader_param
        param = {**(param.to_dict() if hasattr(param, "to_dict") else dict(param)),
                 "batch_size": mbs * args.nproc, "seed": getattr(training, "seed", 1024)}
        loader = build_mm_dataloader(dataset, param, process_group=get_parallel_state().get_dp_group(),
                                     dataset_param=cfg.data.dataset_param, model=model)
        indices = list(next(iter(loader.batch_sampler)))
        drops = dropout_modules(model)
        model.eval()
        from mindspeed_mm.fsdp.utils.dtype import get_dtype

        name = getattr(cfg.parallel.fsdp_plan, "param_dtype", None)
        dtype = get_dtype(name) if name else torch.float32  # what the engine casts float inputs to
        model.to(dtype)
        losses = []
        with torch.no_grad():
            for idx in indices:
                batch = dict(collate_fn([dataset[idx]]))
                batch = {k: (v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
                         for k, v in batch.items()}
                loss_func = engine_loss_func(cfg, batch)
                if loss_func is not None:
                    model.loss_function = loss_func
                out = model(**batch, use_cache=False)
                losses.append(float(out.loss.detach().float()))
    except Exception as exc:  # probe boundary: the failure is the result
        import traceback

        traceback.print_exc()
        emit({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    extra = {"indices": indices, "per_sample": losses, "loss": sum(losses) / len(losses), "dtype": str(dtype)}
    if drops:
        return not_comparable(f"{len(drops)} dropout modules with p > 0 (e.g. {drops[0]}): the run trains with "
                              "dropout on, one process cannot draw the same masks", **extra)
    emit({"comparable": True, "why_not": None, **extra})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
