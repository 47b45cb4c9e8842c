"""Probe (gate G1, parity): does the plugin class, built the way the target builds it, compute what the source's own
class computes? Runs in the target runtime; imports nothing from msmigrate.

    python model_parity.py --model <source folder> --target <root> --plugin <entry> ... --model-id <id>
                           --model-name-or-path <source folder> [--sample-data <train.json>] [--shrink-layers 2]

One random init, shared: the SOURCE class (``architectures`` / ``auto_map``, as transformers would load it) is built
on a shrunk copy of the source config with a fixed seed; its state dict is loaded into the PLUGIN class (resolved in
the target's ``model_register``, config loaded like ModelHub: AutoConfig of ``model_name_or_path``, the same shrink,
``overwrite_transformer_config`` when the class has one). Each model gets its own copy of the config, so a plugin that
changes a config value (an ``rms_norm_eps``) is caught rather than shared. Both run fp32, in TRAINING mode (the mode
the trainer runs the plugin in; some plugins have training-only code paths, and the real qwen3vl MoE's eval-only
path cannot even run off-NPU) with every dropout probability set to 0 in both configs and every dropout module, so
the pass is deterministic; on the same batch: the source processor's batch of the first real sample, else a
synthetic text batch.

Two plugin paths are compared with the source:
- ``eager``: plugin built normally, source weights loaded (``load_state_dict``, strict).
- ``meta``: plugin built on the meta device as ``init_model_with_meta_device`` does, ``to_empty`` (uninitialised
  storage made deterministic: ``torch.utils.deterministic.fill_uninitialized_memory`` fills it with NaN / the
  largest integer; the target's own ``to_empty_if_needed`` where it has one), then only the persistent state dict
  loaded, as ``training.load`` restores a checkpoint, then the target's ``retie_embeddings`` where it has one. Whatever
  the plugin does not rebuild itself (non-persistent buffers: rotary ``inv_freq``, vision ``position_ids``) stays
  garbage there, and the logits show it. Tied embeddings are checked too (the source's tie still holds?).

Result: per path ``max_abs_dlogit``, ``dloss``, ``loss``; ``source_loss``; the tolerance; ``missing`` /
``unexpected`` keys; ``nonpersistent_buffers`` (names); ``tied`` facts; ``dropout_zeroed`` (config keys);
``first_divergence`` where the eager logits differ: the first module, in the plugin's execution order, whose output
differs from the same-named source module's by more than the logit tolerance (its class and max |Δ|), so a failure
says where the two computations part; ``passed`` and ``problems``.
"""
import inspect
import math
import os
import sys
import time

from _model_build import (add_source_args, emit, forward_params, import_plugins, model_args_for, registry_dict,
                          shrink_config, to_compute_dtype)
from _meta_init import build, materialize, persistent_keys, retie
from _dtypes import cast_problem, dtype_differences  # noqa: F401  (dtype_differences: this probe's API too)
from _import_effects import changed, snapshot

LOGIT_TOL = 1e-4
LOSS_TOL = 1e-5


def extra_args(ap):
    ap.add_argument("--shrink-layers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--sample-data")
    ap.add_argument("--media-token-id", type=int, help="the media token id the target's pipeline writes (with "
                                                         "--batch-file): for a source whose caller sets it")
    ap.add_argument("--batch-file", help="a collated batch of the target's own pipeline (G2's), used instead of the "
                                         "source processor's / the synthetic one")
    ap.add_argument("--source-training", help="JSON facts of the source's own training code: with --sample-data, "
                                              "its own dataset + collator make the batch and its own loss path "
                                              "(compute_loss, else the model's .loss) is the reference")
    ap.add_argument("--dropped-key", action="append", default=[],
                    help="a processor output the target's pipeline drops (repeatable): the source's own forward on "
                         "its own batch must give the same loss and logits without it")
    ap.add_argument("--logit-tol", type=float, default=LOGIT_TOL)
    ap.add_argument("--loss-tol", type=float, default=LOSS_TOL)


def source_class(args):
    """(class, config) of the source as transformers would load it."""
    import argparse

    from _model_build import resolve

    ns = argparse.Namespace(**{**vars(args), "model_id": None})
    return resolve(ns)[:2]


def plugin_class(args):
    """(class, config) the way ModelHub resolves a registered id (AutoConfig of model_name_or_path)."""
    import transformers
    from _single_rank import start_single_rank

    import_plugins(args.target, args.plugin)
    start_single_rank()
    import importlib

    register = importlib.import_module("mindspeed_mm.fsdp.utils.register")
    cls = registry_dict(register.model_register).get(args.model_id)
    if cls is None:
        raise KeyError(f"ID '{args.model_id}' is not registered.")
    config = transformers.AutoConfig.from_pretrained(args.model_name_or_path, trust_remote_code=args.trust_remote_code,
                                                     _attn_implementation=args.attn_implementation)
    if callable(getattr(cls, "overwrite_transformer_config", None)):
        config = cls.overwrite_transformer_config(config, model_args_for(
            args.model_id, args.model_name_or_path, args.attn_implementation), None)
    return cls, config


STOCHASTIC_KEYS = ("dropout", "layerdrop", "drop_path")  # dropout, layer drop, stochastic depth: random in training


def no_dropout(config):
    """Set every positive dropout / layer-drop / drop-path probability of the config (sub-configs too) to 0, so a
    training-mode forward is deterministic; returns the keys."""
    zeroed, seen = [], set()

    def visit(cfg, prefix):
        if id(cfg) in seen:
            return
        seen.add(id(cfg))
        for key, value in list(vars(cfg).items()):
            if any(s in key for s in STOCHASTIC_KEYS) and isinstance(value, float) and value > 0:
                setattr(cfg, key, 0.0)
                zeroed.append(prefix + key)
            elif hasattr(value, "to_dict") and hasattr(value, "model_type"):
                visit(value, f"{prefix}{key}.")

    visit(config, "")
    return zeroed


def training_mode(model):
    """Training mode as the trainer runs it, dropout modules made inert (p = 0)."""
    import torch

    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0


def run_forward(model, batch):
    import torch

    training_mode(model)
    with torch.no_grad():
        out = model(**batch, use_cache=False)
    logits = getattr(out, "logits", None)
    loss = getattr(out, "loss", None)
    return (logits.detach().float() if logits is not None else None,
            float(loss.detach().float()) if loss is not None else None)


def target_batch(path, params):
    """The target pipeline's collated batch as both forwards get it: only keys the source's forward names (every key
    when it takes ``**kwargs``: ``params`` is then None), floating tensors in fp32 like the models."""
    import torch
    from forward_smoke import load_batch

    batch = {}
    for key, value in load_batch(path).items():
        if params is not None and key not in params:
            continue
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            value = value.float()
        batch[key] = value
    return batch


MEDIA_WORDS = ("img", "image", "media", "vision")


def caller_set_media_ids(model, media_token_id):
    """Remote code whose caller sets the media token id on the model (InternVL's ``chat()`` sets
    ``img_context_token_id`` from its tokenizer; the class leaves it None): set every such attribute that is still
    None — a media-named ``*_token_id`` / ``*_token_index`` — to the id the target's pipeline writes. Returns the
    names set."""
    if media_token_id is None:
        return []
    done = []
    for name, value in list(vars(model).items()):
        if value is None and name.endswith(("token_id", "token_index")) and any(w in name for w in MEDIA_WORDS):
            setattr(model, name, media_token_id)
            done.append(name)
    return done


def required_params(cls, batch):
    """forward's parameters without a default that ``batch`` does not fill (self and catch-alls aside)."""
    import inspect

    try:
        params = inspect.signature(cls.forward).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.name != "self" and p.default is p.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in batch]


MAPPING_KEYWORDS = ("labels", "attention_mask", "use_cache")  # what a dict-taking forward's **kwargs pass on


def mapping_param(cls, unfed):
    """The name of the one required argument that takes the whole batch as a mapping (MiniCPM-V-style
    ``forward(data, **kwargs)``: input_ids, pixel_values, … inside ``data``), or None. Only when it is the single
    input the batch lacks and the forward can also take the labels (a ``labels`` parameter or ``**kwargs``)."""
    if len(unfed) != 1:
        return None
    params, kwargs = forward_params(cls)
    return unfed[0] if kwargs or "labels" in params else None


def feed_as_mapping(model, name):
    """Make ``model(**batch)`` call the model's own forward as ``forward(<name>=batch, labels=…, …)``: the batch as
    that one mapping, the keys its catch-all passes on (``MAPPING_KEYWORDS``) as keywords too."""
    inner = model.forward
    params, kwargs = forward_params(type(model))

    def fed(**batch):
        keywords = {k: batch[k] for k in MAPPING_KEYWORDS if k in batch and (kwargs or k in params)}
        return inner(**{name: {k: v for k, v in batch.items() if k != "use_cache"}}, **keywords)

    model.forward = fed  # an instance attribute: nn.Module.__call__ runs it, hooks on submodules still fire
    return f"forward({name}=<batch>, {', '.join(k + '=' for k in MAPPING_KEYWORDS if kwargs or k in params)}…)"


def dropped_outputs(source, batch, keys, ref_logits, ref_loss, logit_tol, loss_tol):
    """What the target loses with each processor output it drops: the source's own forward on its own batch without
    that key, against the same forward with it. A key the batch does not hold is reported as not examined. ->
    (records, problems). Every other parity check feeds source and plugin the SAME batch, so a key dropped from both
    (modality-expert routing ids) changes what the model computes and none of them sees it."""
    records, problems = [], []
    for key in keys:
        if key not in batch:
            records.append({"key": key, "examined": False, "why_not": "not in the source processor's batch"})
            continue
        try:
            logits, loss = run_forward(source, {k: v for k, v in batch.items() if k != key})
        except Exception as exc:  # probe boundary: a forward that cannot run without it needs it
            records.append({"key": key, "examined": True, "error": f"{type(exc).__name__}: {exc}"[:300]})
            problems.append(f"the source's forward fails without processor output {key!r}, which the target's "
                            f"pipeline drops: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        dlogit, dloss = compare(ref_logits, ref_loss, logits, loss)
        records.append({"key": key, "examined": True, "max_abs_dlogit": dlogit, "dloss": dloss})
        if dlogit is None or dloss is None or not (dlogit <= logit_tol and dloss <= loss_tol):
            problems.append(f"processor output {key!r} changes what the source computes (max |Δlogit| {dlogit}, "
                            f"|Δloss| {dloss} without it on its own batch), but the target's pipeline drops it: "
                            "the migrated model would train without it")
    return records, problems


def compare(ref_logits, ref_loss, logits, loss):
    import torch

    if logits is None or ref_logits is None:
        dlogit = None
    elif logits.shape != ref_logits.shape:
        dlogit = float("inf")
    else:
        diff = (logits - ref_logits).abs()
        dlogit = float(torch.nan_to_num(diff, nan=float("inf")).max()) if diff.numel() else 0.0
    dloss = abs(loss - ref_loss) if loss is not None and ref_loss is not None else None
    if dloss is not None and not math.isfinite(dloss):
        dloss = float("inf")
    return dlogit, dloss


def first_tensor(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for item in value:
            found = first_tensor(item)
            if found is not None:
                return found
    return None


def module_outputs(model, batch):
    """name -> (class name, the first tensor the module returned on its first call), and the names in the order
    they returned."""
    outputs, order, handles = {}, [], []

    def hook(name):
        def record(module, _args, output):
            tensor = first_tensor(output)
            if name not in outputs and tensor is not None and tensor.is_floating_point():
                outputs[name] = (type(module).__name__, tensor.detach().float().clone())
                order.append(name)
        return record

    for name, module in model.named_modules():
        if name:
            handles.append(module.register_forward_hook(hook(name)))
    try:
        run_forward(model, batch)
    finally:
        for handle in handles:
            handle.remove()
    return outputs, order


def plugin_rejects(src_cls, plg_cls, exc, ref_loss, batch_source, keys, root, seconds):
    """The result when the source's own forward ran on a batch and the plugin's raises on it: the batch is one the
    source's model takes, so what rejects it is the plugin (the file that defines the plugin class, relative to the
    target root, is named as the gate's lines name a cause: ``(defined in <path>)``)."""
    # the plugin class's own file (a decorated or inherited forward's file is the library's): what the source lacks
    try:
        path = inspect.getsourcefile(plg_cls)
    except TypeError:
        path = None
    rel = os.path.relpath(path, root) if path and root and os.path.abspath(path).startswith(os.path.abspath(root)) \
        else path
    where = f" (defined in {rel})" if rel else ""
    return {"source_class": f"{src_cls.__module__}.{src_cls.__qualname__}",
            "plugin_class": f"{plg_cls.__module__}.{plg_cls.__qualname__}", "batch_source": batch_source,
            "batch_keys": keys, "source_loss": ref_loss, "plugin_rejects": f"{type(exc).__name__}: {exc}"[:600],
            "passed": False,
            "problems": [f"the source's own model takes the same batch ({batch_source}; loss {ref_loss:.6g}) and "
                         f"the plugin's forward{where} rejects it: {type(exc).__name__}: {exc}"[:900]],
            "seconds": round(seconds, 2)}


def first_divergence(source, plugin, batch, tol):
    """The first plugin module (execution order; a child returns before its parent) whose output differs from the
    source module of the same name and class by more than ``tol``; None when none does. Modules of another class
    under the same name (a plugin's own router where the source has a Linear) have other interfaces: skipped."""
    ref, _ = module_outputs(source, batch)
    got, order = module_outputs(plugin, batch)
    compared = 0
    for name in order:
        (cls_b, b), (cls_a, a) = got[name], ref.get(name, (None, None))
        if a is None or cls_a != cls_b or a.shape != b.shape:
            continue
        compared += 1
        delta = float(torch_nan_max((a - b).abs()))
        if not delta <= tol:
            return {"module": name, "class": cls_b, "max_abs_diff": delta, "modules_compared": compared}
    return None


def torch_nan_max(diff):
    import torch

    return torch.nan_to_num(diff, nan=float("inf")).max() if diff.numel() else torch.tensor(0.0)


def source_forward(source, batch, facts, model_dir):
    """(logits, loss) of the source's own forward on ``batch``: its own training code's loss path where ``facts``
    (the source's own pipeline) says where it is, else the transformers call."""
    import torch

    if facts is None:
        return run_forward(source, batch)
    from _own_pipeline import own_forward

    training_mode(source)
    with torch.no_grad():
        logits, loss = own_forward(source, batch, facts, model_dir)
    return logits.detach().float(), float(loss.detach().float())


def beyond(dlogit, dloss, logit_tol, loss_tol):
    """The differences as words (``max |Δlogit| 0.003, |Δloss| 1.3e-05``) when either is past its tolerance, else
    None."""
    if not ((dlogit is not None and not dlogit <= logit_tol) or (dloss is not None and not dloss <= loss_tol)):
        return None
    return ", ".join(f"{label} {value:.3g}" for label, value in (("max |Δlogit|", dlogit), ("|Δloss|", dloss))
                     if value is not None)


def source_pair(source, args, src_cfg, facts):
    """(the two-sample batch of the source processor, the source's (logits, loss) on it) — computed before the
    plugin is imported, like every reference here; (None, None) where there is none (the source's own pipeline or a
    target batch decides G1's batch, no records with an image, a processor that refuses a batch, a source that
    refuses it)."""
    if facts is not None or args.batch_file or not args.sample_data:
        return None, None
    from forward_smoke import sample_pair_batch

    params, takes_kwargs = forward_params(type(source))
    try:
        pair = sample_pair_batch(args.model, args.sample_data, src_cfg, None if takes_kwargs else params,
                                 args.trust_remote_code)
        if pair is None or required_params(type(source), pair):
            return None, None
        pair = to_compute_dtype(pair, source)
        return pair, run_forward(source, pair)
    except Exception:  # probe boundary: no such batch for this source; the one-sample comparison stands alone
        return None, None


def pair_parity(plugin, pair, pair_ref, logit_tol=LOGIT_TOL, loss_tol=LOSS_TOL):
    """The plugin against the source on the two-sample batch, over the positions the batch attends (padding's logits
    are nobody's): ``{"examined", "max_abs_dlogit", "dloss", "problem"}``."""
    if pair is None:
        return {"examined": False}
    import torch

    ref_logits, ref_loss = pair_ref
    try:
        logits, loss = run_forward(plugin, pair)
    except Exception as exc:  # probe boundary: a batch the source takes and the plugin rejects is the finding
        return {"examined": True, "problem": f"two-sample batch (the source processor's, two samples with an image "
                                             f"each, padded): the source's own model takes it and the plugin's "
                                             f"forward raises {type(exc).__name__}: {str(exc)[:300]}"}
    mask = pair.get("attention_mask")
    if mask is not None and logits is not None and ref_logits is not None and logits.shape == ref_logits.shape:
        keep = mask.bool().unsqueeze(-1)
        logits, ref_logits = torch.where(keep, logits, 0.0), torch.where(keep, ref_logits, 0.0)
    dlogit, dloss = compare(ref_logits, ref_loss, logits, loss)
    out = {"examined": True, "max_abs_dlogit": dlogit, "dloss": dloss, "problem": None,
           "samples": int(pair["input_ids"].shape[0]) if "input_ids" in pair else None}
    figs = beyond(dlogit, dloss, logit_tol, loss_tol)
    if figs:
        out["problem"] = (f"two-sample batch (the source processor's, two samples with an image each, padded): {figs} "
                          f"against the source class on the attended positions, where the one-sample batch agrees — "
                          f"the plugin lets one sample's tokens or image patches reach the other's (an attention "
                          f"span over every image of the batch), or reads the padding")
    return out


def import_effects(source, batch, facts, args, before, ref_logits, ref_loss):
    """What importing and building the plugin changed in the source's own code (``_import_effects``) and in what the
    source computes on the same batch: ``{"patched": [...], "max_abs_dlogit", "dloss", "problem"}``; a patch that
    leaves the source's numbers within tolerance is named, not a problem."""
    patched = changed(before, args.target)
    logits, loss = source_forward(source, batch, facts, args.model)
    dlogit, dloss = compare(ref_logits, ref_loss, logits, loss)
    out = {"patched": patched[:20], "max_abs_dlogit": dlogit, "dloss": dloss, "problem": None}
    figs = beyond(dlogit, dloss, args.logit_tol, args.loss_tol)
    if figs:
        named = ", ".join(f"{p['name']} (now {p['now_from'] or 'a builtin'})" for p in patched[:5]) or \
            "no class or function the source's modules name (a patch deeper in a library)"
        out["problem"] = (f"importing and building the plugin changes what the source's own model computes on the "
                          f"same batch ({figs}): the plugin package patches code the source runs — {named}; the "
                          f"source's reference was computed before the import, so the plugin is compared with the "
                          f"unpatched source")
    return out


def still_nan(model):
    """Names of the parameters and buffers holding NaN after meta init + load: storage ``to_empty`` filled (see
    main) that neither the plugin nor the load wrote."""
    import torch

    with torch.no_grad():
        return [name for name, t in [*model.named_parameters(), *model.named_buffers()]
                if t.is_floating_point() and bool(torch.isnan(t).any())]


def tie_facts(model):
    """Whether input and output embeddings share storage (None when the model has no such pair)."""
    try:
        inp, out = model.get_input_embeddings(), model.get_output_embeddings()
    except (AttributeError, NotImplementedError):
        return None
    if inp is None or out is None or not hasattr(inp, "weight") or not hasattr(out, "weight"):
        return None
    return inp.weight is out.weight or inp.weight.data_ptr() == out.weight.data_ptr()


def main(argv):
    import argparse

    ap = argparse.ArgumentParser()
    add_source_args(ap)
    extra_args(ap)
    args = ap.parse_args(argv)
    start = time.monotonic()
    try:
        import torch

        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = True
        src_cls, src_cfg = source_class(args)
        src_params, src_kwargs = forward_params(src_cls)
        facts = None
        if args.source_training and args.sample_data:
            import json

            with open(args.source_training, encoding="utf-8") as fh:
                facts = json.load(fh)
            facts = facts if facts.get("kind") == "own" and facts.get("dataset") else None
        if facts is None and "labels" not in src_params and not src_kwargs:
            # A remote-code forward with its own contract (no labels, no loss): the plugin adapts it, so the two
            # cannot be called on one batch and compared; say so instead of guessing an adapter here.
            emit({"source_class": f"{src_cls.__module__}.{src_cls.__qualname__}", "passed": None,
                  "why_not": "the source's own forward takes no labels (its contract differs from transformers'), "
                             "so its loss and logits cannot be compared with the plugin's on the same batch",
                  "problems": [], "seconds": round(time.monotonic() - start, 2)})
            return 0
        # the source's side first, whole, before the plugin package is imported: an import that patches a library
        # class the source runs would otherwise rewrite the oracle too (``_import_effects``)
        shrink_config(src_cfg, args.shrink_layers)
        no_dropout(src_cfg)
        torch.manual_seed(args.seed)
        attention = args.attn_implementation
        try:
            source = build(src_cls, src_cfg)
        except ValueError as exc:
            if "attention implementation" not in str(exc) and "attn_implementation" not in str(exc):
                raise
            # The source's own class (remote code, say) has no SDPA path: compare like with like, both eager.
            attention = "eager"
            src_cfg._attn_implementation = "eager"
            torch.manual_seed(args.seed)
            source = build(src_cls, src_cfg)
        params, takes_kwargs = forward_params(type(source))
        from forward_smoke import sample_batch, synthetic_batch

        batch_source, sample_error = "synthetic", None
        if facts is not None:
            # the source's own training pipeline makes the batch (its dataset + collator on its own records)
            from _own_pipeline import own_batches

            own = own_batches(args.model, args.sample_data, facts, 1, args.trust_remote_code)[0][1]
            batch = {k: v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                     for k, v in own.items()}
            batch_source = (f"the source's own training pipeline ({facts['dataset']['file']} "
                            f"{facts['dataset']['class']} + {(facts.get('collator') or {}).get('name')})")
        elif args.batch_file:
            batch, batch_source = target_batch(args.batch_file, None if takes_kwargs else params), "target pipeline (G2's collated batch)"
        elif args.sample_data:
            try:
                batch, batch_source = sample_batch(args.model, args.sample_data, src_cfg, params,
                                                   args.trust_remote_code), "source processor"
            except Exception as exc:  # probe boundary: no usable processor -> synthetic batch
                sample_error = f"{type(exc).__name__}: {exc}"
        if batch_source == "synthetic":
            batch = synthetic_batch(src_cfg, params, args.seq_len, args.seed)
        batch = to_compute_dtype(batch, source)
        unfed = [] if facts is not None else required_params(type(source), batch)
        # the target pipeline's batch can feed a forward that takes the whole batch as one dict; the synthetic or
        # processor batch of G1 cannot say what that dict must hold (media), so G1 stays "not comparable"
        mapping = mapping_param(type(source), unfed) if args.batch_file else None
        called_as = feed_as_mapping(source, mapping) if mapping else None
        if unfed and not mapping:
            # A forward that requires media (InternVL-chat's positional pixel_values) cannot run on the text-only
            # synthetic batch, and the source processor gave no batch: not comparable, with why, not a G1 failure.
            emit({"source_class": f"{src_cls.__module__}.{src_cls.__qualname__}", "passed": None,
                  "batch_source": batch_source, "sample_batch_error": sample_error, "unfed": unfed,
                  "why_not": f"the source's own forward requires {unfed}, which the {batch_source} batch does not "
                             f"carry" + (f" (the source processor's batch failed: {sample_error})"
                                         if sample_error else ""),
                  "problems": [], "seconds": round(time.monotonic() - start, 2)})
            return 0
        media_ids_set = caller_set_media_ids(source, args.media_token_id) if args.batch_file else []
        try:
            if facts is not None:
                # the source's own loss path on its own batch; the plugin gets that batch as the target's trainer
                # feeds it (keyword arguments, labels aligned)
                from _own_pipeline import aligned_batch

                called_as = (f"{facts['loss_at']} (forward call: {facts.get('forward_call')})")
                plugin_batch = aligned_batch(batch, facts)
            else:
                plugin_batch = batch
            ref_logits, ref_loss = source_forward(source, batch, facts, args.model)
        except Exception as exc:  # probe boundary: the target's batch is not the source's own input format
            if not args.batch_file:
                raise
            # the oracle cannot run on the target pipeline's batch (the plugin's forward on it is G2's own check):
            # nothing to compare, said with the error, not a verdict on the plugin
            emit({"source_class": f"{src_cls.__module__}.{src_cls.__qualname__}", "passed": None,
                  "batch_source": batch_source, "batch_keys": sorted(batch), "caller_set": media_ids_set,
                  "source_called_as": called_as,
                  "media_token_id": args.media_token_id,
                  "why_not": (f"the source's own forward fails on the target pipeline's batch: "
                              f"{type(exc).__name__}: {exc}"
                              # which id the caller-set rule wrote: a wrong media token shows here, not only a shape
                              + (f" (with {', '.join(media_ids_set)} = {args.media_token_id}, the media token read "
                                 f"from G2's batch)" if media_ids_set else ""))[:600],
                  "problems": [], "seconds": round(time.monotonic() - start, 2)})
            return 0
        dropped, dropped_problems = [], []
        if args.dropped_key and batch_source == "source processor":
            dropped, dropped_problems = dropped_outputs(source, batch, args.dropped_key, ref_logits, ref_loss,
                                                        args.logit_tol, args.loss_tol)
        elif args.dropped_key:
            dropped = [{"key": k, "examined": False, "why_not": f"the batch is the {batch_source}'s, not the source "
                                                               "processor's"} for k in args.dropped_key]
        pair, pair_ref = source_pair(source, args, src_cfg, facts)
        state = source.state_dict()
        nonpersistent = persistent_keys(source)
        source_tied = tie_facts(source)
        before_import = snapshot(source)

        plg_cls, plg_cfg = plugin_class(args)
        shrink_config(plg_cfg, args.shrink_layers)
        dropout_zeroed = no_dropout(plg_cfg)
        if attention != args.attn_implementation:
            plg_cfg._attn_implementation = attention
        eager = build(plg_cls, plg_cfg)
        caller_set_media_ids(eager, args.media_token_id if media_ids_set else None)
        # the source again, on the same batch, now that the plugin is imported and built: a change is the plugin's
        import_effect = import_effects(source, batch, facts, args, before_import, ref_logits, ref_loss)
        missing, unexpected = eager.load_state_dict(state, strict=False)
        cast = dtype_differences(source, eager)
        cast_found = cast_problem(eager, plg_cls, cast, args.target)
        try:
            e_logits, e_loss = run_forward(eager, plugin_batch)
        except Exception as exc:  # probe boundary: a rejection the source did not make is the result
            emit(plugin_rejects(src_cls, plg_cls, exc, ref_loss, batch_source, sorted(batch), args.target,
                                time.monotonic() - start))
            return 0
        e_dlogit, e_dloss = compare(ref_logits, ref_loss, e_logits, e_loss)
        pair_check = pair_parity(eager, pair, pair_ref, args.logit_tol, args.loss_tol)
        divergence = None
        if e_dlogit is not None and not e_dlogit <= args.logit_tol and \
                (facts is None or facts.get("forward_call") == "kwargs"):
            divergence = first_divergence(source, eager, batch, args.logit_tol)

        meta = build(plg_cls, plg_cfg, meta=True)
        caller_set_media_ids(meta, args.media_token_id if media_ids_set else None)
        materialized = materialize(meta)
        persistent = {k: v for k, v in state.items() if k not in set(nonpersistent)}
        meta.load_state_dict(persistent, strict=False)
        retied = retie(meta)
        unset = still_nan(meta)
        m_logits, m_loss = run_forward(meta, plugin_batch)
        m_dlogit, m_dloss = compare(ref_logits, ref_loss, m_logits, m_loss)
        meta_tied = tie_facts(meta)
    except Exception as exc:  # probe boundary: the failure is the result
        import traceback

        traceback.print_exc()
        emit({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    problems = []
    if missing or unexpected:
        problems.append(f"the plugin's parameters are not the source's: missing {list(missing)[:5]}, "
                        f"unexpected {list(unexpected)[:5]}")
    for label, dlogit, dloss in (("eager", e_dlogit, e_dloss), ("meta init + load", m_dlogit, m_dloss)):
        if dlogit is None or dloss is None:
            problems.append(f"{label}: no logits/loss to compare")
        elif not (dlogit <= args.logit_tol and dloss <= args.loss_tol):
            where = ""
            if label == "eager" and divergence:
                where = (f"; first differing module {divergence['module']} ({divergence['class']}, max |Δ| "
                         f"{divergence['max_abs_diff']:.3g})")
            if label != "eager" and unset:
                where = f"; still NaN after the load: {', '.join(unset[:5])}" + (", ..." if len(unset) > 5 else "")
            problems.append(f"{label}: max |Δlogit| {dlogit:.3g} (tol {args.logit_tol:g}), |Δloss| {dloss:.3g} "
                            f"(tol {args.loss_tol:g}) against the source class{where}")
    if cast_found:
        problems.append(cast_found)
    if import_effect.get("problem"):
        problems.append(import_effect["problem"])
    if pair_check.get("problem") and e_dlogit is not None and e_dlogit <= args.logit_tol and \
            e_dloss is not None and e_dloss <= args.loss_tol:
        problems.append(pair_check["problem"])  # only where the one-sample batch agrees: what the pair adds
    problems += dropped_problems
    if source_tied and not meta_tied:
        problems.append("meta init + load: input and output embeddings are no longer tied (the source ties them)")

    def fig(x):
        return None if x is None else (x if math.isfinite(x) else str(x))

    emit({
        "source_class": f"{src_cls.__module__}.{src_cls.__qualname__}",
        "plugin_class": f"{plg_cls.__module__}.{plg_cls.__qualname__}",
        "batch_source": batch_source, "sample_batch_error": sample_error, "batch_keys": sorted(batch),
        "source_loss": ref_loss, "logits_shape": list(ref_logits.shape) if ref_logits is not None else None,
        "attn_implementation": attention, "mode": "train, dropout 0", "dropout_zeroed": dropout_zeroed,
        "first_divergence": divergence, "caller_set": media_ids_set, "source_called_as": called_as,
        "plugin_import_changes": import_effect, "two_sample_batch": pair_check,
        "eager": {"loss": fig(e_loss), "max_abs_dlogit": fig(e_dlogit), "dloss": fig(e_dloss)},
        "meta": {"loss": fig(m_loss), "max_abs_dlogit": fig(m_dlogit), "dloss": fig(m_dloss)},
        "tolerance": {"max_abs_dlogit": args.logit_tol, "dloss": args.loss_tol},
        "missing": list(missing), "unexpected": list(unexpected), "nonpersistent_buffers": nonpersistent,
        "meta_still_nan": unset, "dtype_differences": [list(c) for c in cast[:20]],
        "tied": {"source": source_tied, "meta": meta_tied}, "dropped_outputs": dropped,
        "meta_path": {"materialize": materialized, "retie_embeddings": retied}, "dtype": "float32", "device": "cpu",
        "passed": not problems, "problems": problems, "seconds": round(time.monotonic() - start, 2),
    })
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
