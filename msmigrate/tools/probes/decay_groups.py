"""Probe: which parameters the target's optimizer decays for the delivered config, against which the source's recipe
decays (runs IN the target runtime; imports nothing from msmigrate).

    python decay_groups.py --target T --plugin P --model-id ID --model-name-or-path SRC --model SRC --config YAML

Both models are built on the meta device from the same config, cut to ``--shrink-layers`` layers per tower (the
kinds of parameters are the full model's; names are reported with layer indices folded to ``*``):

- the target's decay set: the parameters of the groups with ``weight_decay`` > 0 in the optimizer the target's own
  trainer builds for the delivered config (its ``Trainer.get_optimizer``), on the plugin class — what the trainer
  does, not what its argument names promise;
- the source's: ``transformers.Trainer.get_decay_parameter_names`` on the source class (the HF Trainer's rule:
  biases and normalisation weights are never decayed, whatever the value).

Where the target decays parameters the source never does, each field of the delivered ``training`` section whose
name says it exempts from decay (``no_decay*``) is set to what would exempt them — the owning modules' class names
for a field about modules or layers, ``bias`` for one about parameter names — and the target's optimizer is built
again: ``candidate.removes`` says whether the trainer then decays exactly the source's set (a fix the trainer applies)
or not (the trainer does not read that field). Prints ``MSMIGRATE_PROBE_RESULT {json}``: ``source_decayed``,
``target_decayed``, ``extra`` (decayed by the target, never by the source; folded names with their owners' classes),
``candidate``, ``not_in_source`` (target parameters the source class does not have, not compared)."""
import os
import re
import sys
import time

from _model_build import add_source_args, emit, shrink_config

_INDEX = re.compile(r"\.\d+(?=\.)")


def fold(name):
    """A parameter name with its layer indices folded: ``model.layers.*.input_layernorm.weight``."""
    return _INDEX.sub(".*", name)


def decayed_names(optimizer, model):
    """Names of the parameters in the optimizer's groups with weight_decay > 0."""
    names = {id(p): n for n, p in model.named_parameters()}
    return sorted(names[id(p)] for g in optimizer.param_groups if (g.get("weight_decay") or 0) > 0
                  for p in g["params"] if id(p) in names)


def owners(model, wanted):
    """name -> class name of the module that holds the parameter directly."""
    out = {}
    for mod_name, module in model.named_modules():
        for p_name, _ in module.named_parameters(recurse=False):
            full = f"{mod_name}.{p_name}" if mod_name else p_name
            if full in wanted:
                out[full] = type(module).__name__
    return out


def exempting_fields(training):
    """The training section's fields whose name says they exempt from weight decay, with what each takes:
    ``modules`` (class names) or ``names`` (parts of parameter names)."""
    fields = {}
    for key in sorted(vars(training)) if hasattr(training, "__dict__") else []:
        if "no_decay" not in key.lower():
            continue
        low = key.lower()
        fields[key] = "modules" if ("module" in low or "layer" in low) else "names" if (
            "param" in low or "name" in low) else None
    return {k: v for k, v in fields.items() if v}


def candidate_values(extra, held_by, fields):
    """What each exempting field would be set to for the ``extra`` parameters: biases by name, the rest by the class
    of the module that holds them."""
    biases = sorted({"bias" for n in extra if n.rsplit(".", 1)[-1] == "bias"})
    classes = sorted({held_by[n] for n in extra if n.rsplit(".", 1)[-1] != "bias" and n in held_by})
    values = {}
    for key, kind in fields.items():
        values[key] = classes if kind == "modules" else biases
    if not any(values.values()):
        return {}
    return values


def load_config(config):
    from mindspeed_mm.config.config_manager import ConfigManager
    from mindspeed_mm.fsdp.params.argument import Arguments

    sys.argv = ["trainer.py", os.path.abspath(config)]
    return ConfigManager(config_class=Arguments).load_and_parse()


def main(argv):
    import argparse

    ap = argparse.ArgumentParser()
    add_source_args(ap)
    ap.add_argument("--config", required=True)
    ap.add_argument("--shrink-layers", type=int, default=2)
    args = ap.parse_args(argv)
    start = time.monotonic()
    try:
        target = os.path.abspath(args.target)
        os.environ.setdefault("NON_MEGATRON", "true")
        os.chdir(target)
        sys.path.insert(0, target)
        from _meta_init import build
        from model_parity import plugin_class, source_class
        from training_parity import target_optimizer  # the trainer's own get_optimizer, fused kernels off

        src_cls, src_cfg = source_class(args)
        plg_cls, plg_cfg = plugin_class(args)
        for c in (src_cfg, plg_cfg):
            shrink_config(c, args.shrink_layers)
        cfg = load_config(args.config)
        weight_decay = float(getattr(cfg.training, "weight_decay", 0.0) or 0.0)
        source = build(src_cls, src_cfg, meta=True)
        plugin = build(plg_cls, plg_cfg, meta=True)
        import transformers

        try:
            src_decayed = set(transformers.Trainer.get_decay_parameter_names(None, source))
        except (AttributeError, TypeError) as exc:  # a transformers whose rule needs a Trainer: not examined
            emit({"examined": False, "why_not": f"Trainer.get_decay_parameter_names: {type(exc).__name__}: {exc}"})
            return 0
        trainable = {n for n, p in plugin.named_parameters() if p.requires_grad}
        source_names = {n for n, _ in source.named_parameters()}
        tgt_decayed = set(decayed_names(target_optimizer(cfg, plugin), plugin))
        compared = trainable & source_names
        extra = sorted((tgt_decayed & compared) - src_decayed)
        held_by = owners(plugin, set(extra))
        candidate = None
        fields = exempting_fields(cfg.training)
        values = candidate_values(extra, held_by, fields) if extra else {}
        if values:
            for key, value in values.items():
                setattr(cfg.training, key, value)
            after = set(decayed_names(target_optimizer(cfg, plugin), plugin)) & compared
            candidate = {"set": values, "removes": after == (src_decayed & compared),
                         "still_extra": list(dict.fromkeys(fold(n) for n in sorted(after - src_decayed)))[:12]}
        folded = {}
        for n in extra:
            folded.setdefault(fold(n), held_by.get(n))
    except Exception as exc:  # probe boundary: the failure is the result
        import traceback

        traceback.print_exc()
        emit({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    emit({"examined": True, "weight_decay": weight_decay,
          "plugin_class": f"{plg_cls.__module__}.{plg_cls.__qualname__}",
          "source_class": f"{src_cls.__module__}.{src_cls.__qualname__}",
          "compared": len(compared), "source_decayed": len(src_decayed & compared),
          "target_decayed": len(tgt_decayed & compared),
          "extra": [{"name": n, "held_by": c} for n, c in folded.items()], "extra_count": len(extra),
          "exempting_fields": fields, "candidate": candidate,
          "not_in_source": sorted(fold(n) for n in trainable - source_names)[:12],
          "layers_per_tower": args.shrink_layers, "seconds": round(time.monotonic() - start, 2)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
