"""Probe: one forward with labels on a (shrunk) model -> is there a finite ``.loss``?

    python forward_smoke.py --model <hf folder> [--trust-remote-code] [--shrink-layers 2] [--weights]
                            [--batch <file.json|file.pt>] [--seq-len 16] [--seed 0]
    python forward_smoke.py --target <root> --plugin <entry> ... --model-id <id> --model-name-or-path <dir> ...

Default: random init from the config with layer counts capped at ``--shrink-layers``; ``--weights`` loads the
folder's weights instead (no shrink). The batch: ``--batch`` (a collated one), else with ``--sample-data`` the
source's own processor on the first real sample (chat template + image; what the model actually requires, e.g. a
forward that refuses text-only input), else a synthetic text-only batch (input_ids from the TEXT model's vocabulary
— ``get_text_config()`` —, attention_mask, labels = input_ids; ``mm_token_type_ids`` zeros when the forward takes
it). Keys the forward has no parameter for are left out. The forward is called like the trainer's engine calls
it: ``model(**batch, use_cache=False)``.

Result: ``loss``, ``finite``, ``has_loss_attr`` (the engine reads ``output.loss``), ``output_type``, ``output_keys``,
``forward_params`` + ``accepts_var_kwargs`` (what a collated batch may carry), ``batch_keys``, ``model_class``,
``loss_labels`` (which alignment of the batch's labels the loss assumes, recomputed from the logits both ways).
For a plugin class also the trainer's two ``init_model_with_meta_device`` paths, built again on meta with NaN-filled
storage: ``meta_fresh`` (a config without ``training.load``: init_weights as the trainer calls it) and ``meta_load``
(init_weights skipped, the eager build's checkpoint loaded: what the delivered config and G4–G6 train), each with the
first parameter/buffer still non-finite and its loss; ``error`` names the path that failed. With
``--fresh-untrained`` (the delivered config loads its weights, so no run of it calls init_weights on a meta build) a
fresh-path failure is ``fresh_note`` instead: a fact about a config without ``training.load``, not about this one.
"""
import contextlib
import json
import math
import sys
import time

from _model_build import (emit, error_with_place, forward_params, instantiate, parse, resolve, shrink_config,
                          to_compute_dtype)
from _data_parity import render_messages
from _processor import call_with_images, load_processor


def extra_args(ap):
    ap.add_argument("--shrink-layers", type=int, default=2)
    ap.add_argument("--weights", action="store_true", help="load the folder's weights (from_pretrained)")
    ap.add_argument("--batch", help="JSON (lists) or torch .pt (dict of tensors) batch file")
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sample-data", help="ShareGPT JSON: build the batch with the source processor from sample 0")
    ap.add_argument("--media-token-id", type=int,
                    help="count the media tokens in the batch and the vision features the forward consumes")
    ap.add_argument("--no-meta-load", action="store_true",
                    help="plugin class only: skip the meta-init builds (fresh init_weights path and resumed-load path)")
    ap.add_argument("--fresh-untrained", action="store_true",
                    help="the delivered config loads weights: a fresh-path (no load) failure is a note, not an error")


def vocab_size(config):
    """The text model's vocabulary: a top-level vocab_size of a composite config can be stale."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else None
    for cfg in (text, getattr(config, "llm_config", None), config):
        size = getattr(cfg, "vocab_size", None) if cfg is not None else None
        if isinstance(size, int) and size > 0:
            return size
    return 32


def labels_for(batch, config):
    """The processor batch's input ids as labels, padding and the config's media token ignored (-100)."""
    import torch

    ids = batch["input_ids"]
    labels = ids.clone()
    labels[batch.get("attention_mask", torch.ones_like(ids)) == 0] = -100
    for key in ("image_token_id", "image_token_index"):
        tid = getattr(config, key, None)
        if isinstance(tid, int):
            labels[ids == tid] = -100
    return labels


def sample_batch(folder, data_path, config, params, trust_remote_code):
    """The source processor's inputs for the first sample with an image; labels = input_ids minus media tokens."""
    import os

    from PIL import Image

    with open(data_path, encoding="utf-8") as fh:
        samples = json.load(fh)
    sample = next((s for s in samples if s.get("images")), samples[0])
    root = os.path.dirname(os.path.abspath(data_path))
    images = [Image.open(p if os.path.isabs(p) else os.path.join(root, p)).convert("RGB")
              for p in sample.get("images") or []]
    proc = load_processor(folder, trust_remote_code)[0]
    # the template from whatever carries it (the processor's, else its tokenizer's), as data parity renders it
    text = render_messages(proc, sample["messages"], False)
    tok = getattr(proc, "tokenizer", proc)
    bos = getattr(tok, "bos_token", None)
    kwargs = {"add_special_tokens": False} if bos and text.startswith(bos) else {}
    batch = dict(call_with_images(proc, text, images, return_tensors="pt", **kwargs))
    batch["labels"] = labels_for(batch, config)
    return {k: v for k, v in batch.items() if k in params}


def sample_pair_batch(folder, data_path, config, params, trust_remote_code):
    """The source processor's inputs for TWO samples with an image each, in one padded batch: what a single-sample
    batch cannot show — one sample's tokens or image patches reaching the other's (an attention span over every
    image of the batch, a position count over the batch), padding taken for tokens. The first two samples with images;
    where the records hold one, it twice, the second copy's image mirrored (two identical images attend alike either
    way). Labels as ``sample_batch`` makes them; None when the records have no image or the processor refuses a
    batch."""
    import os

    from PIL import Image, ImageOps

    with open(data_path, encoding="utf-8") as fh:
        samples = [s for s in json.load(fh) if s.get("images")]
    if not samples:
        return None
    root = os.path.dirname(os.path.abspath(data_path))
    pair = (samples * 2)[:2]
    images = [[Image.open(p if os.path.isabs(p) else os.path.join(root, p)).convert("RGB") for p in s["images"]]
              for s in pair]
    if pair[0] is pair[1]:
        images[1] = [ImageOps.mirror(im) for im in images[1]]
    proc = load_processor(folder, trust_remote_code)[0]
    texts = [render_messages(proc, s["messages"], False) for s in pair]
    tok = getattr(proc, "tokenizer", proc)
    bos = getattr(tok, "bos_token", None)
    kwargs = {"add_special_tokens": False} if bos and texts[0].startswith(bos) else {}
    flat = [im for group in images for im in group]
    try:
        batch = dict(proc(text=texts, images=flat, return_tensors="pt", padding=True, **kwargs))
    except (ValueError, TypeError):
        return None
    batch["labels"] = labels_for(batch, config)
    return {k: v for k, v in batch.items() if params is None or k in params}


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


def text_hidden_size(config):
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return getattr(text, "hidden_size", None)


def feature_rows(value, hidden):
    """Rows of width ``hidden`` in what ``get_image_features`` returned: a tensor, a list/tuple of tensors, or a
    model output whose ``pooler_output`` / ``last_hidden_state`` holds them (transformers 5)."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() // hidden if value.dim() >= 1 and value.shape[-1] == hidden else None
    if isinstance(value, (list, tuple)):
        if value and isinstance(value[0], (list, tuple)):
            # (features per image, auxiliary outputs): transformers 4.57's Qwen3-VL returns its deepstack features
            # (one tensor per layer, same rows) after the per-image features; only the first go into the text
            return feature_rows(value[0], hidden)
        parts = [feature_rows(v, hidden) for v in value]
        return sum(parts) if parts and all(p is not None for p in parts) else None
    for key in ("pooler_output", "image_embeds", "last_hidden_state"):
        inner = getattr(value, key, None)
        if inner is not None:
            rows = feature_rows(inner, hidden)
            if rows is not None:
                return rows
    return None


def count_vision_features(model):
    """Wrap every ``get_image_features`` in the model (the top class and its inner model) to record what the
    forward really consumed. Returns the list the wrappers append to."""
    seen, calls = set(), []
    for owner in [model] + [m for _, m in model.named_modules()]:
        fn = getattr(owner, "get_image_features", None)
        if not callable(fn) or id(owner) in seen or "get_image_features" in vars(owner):
            continue
        seen.add(id(owner))

        def wrapped(*a, _fn=fn, **kw):
            out = _fn(*a, **kw)
            calls.append(out)
            return out

        owner.get_image_features = wrapped
    return calls


def loss_labels(output, batch, value):
    """How the forward's loss reads the labels, from its own outputs: the mean cross-entropy recomputed from the logits
    with logits i against label i+1 (``aligned``: the loss shifts) and against label i (``shifted``: it expects labels
    that are already the next token). ``alignment`` is the one that reproduces the loss, None when neither or both
    do (another reduction, extra loss terms, logits not one per input position). Near-uniform logits (a randomly
    initialised model) put both recomputations within the tolerance of the loss: then the one that reproduces it is
    the one at least ten times closer (the other is off by what the labels change, the right one by rounding)."""
    import torch
    import torch.nn.functional as F

    logits, labels = getattr(output, "logits", None), batch.get("labels")
    if not isinstance(logits, torch.Tensor) or not isinstance(labels, torch.Tensor) or value is None:
        return None
    if logits.dim() != 3 or tuple(logits.shape[:2]) != tuple(labels.shape):
        return {"alignment": None, "why_not": f"logits {list(logits.shape)} vs labels {list(labels.shape)}"}
    lg, lab = logits.detach().float(), labels.long()
    ways = {"aligned": (lg[:, :-1], lab[:, 1:]), "shifted": (lg, lab)}
    recomputed = {k: float(F.cross_entropy(x.reshape(-1, x.size(-1)), y.reshape(-1), ignore_index=-100))
                  for k, (x, y) in ways.items()}
    off = {k: abs(v - value) for k, v in recomputed.items() if math.isfinite(v)}
    fits = sorted((k for k, d in off.items() if d <= 1e-4 * max(1.0, abs(value))), key=off.get)
    if len(fits) == 2 and off[fits[0]] * 10 > off[fits[1]]:
        fits = []  # both reproduce it about as well: this batch cannot tell the two apart
    return {"alignment": fits[0] if fits else None, "recomputed": recomputed}


def nonfinite_tensors(model):
    """(kind, name) of the floating parameters and buffers holding a NaN or inf, parameters first, in module order;
    kind: parameter | buffer | non-persistent buffer (what decides whether a checkpoint can restore it)."""
    import torch

    found = []
    with torch.no_grad():
        for name, t in model.named_parameters():
            if t.is_floating_point() and t.device.type != "meta" and not bool(torch.isfinite(t).all()):
                found.append(("parameter", name))
        for mod_name, module in model.named_modules():
            nonpersistent = getattr(module, "_non_persistent_buffers_set", set())
            for buf_name, t in module._buffers.items():
                if t is None or not t.is_floating_point() or t.device.type == "meta" or bool(torch.isfinite(t).all()):
                    continue
                kind = "non-persistent buffer" if buf_name in nonpersistent else "buffer"
                found.append((kind, f"{mod_name}.{buf_name}" if mod_name else buf_name))
    return found


@contextlib.contextmanager
def nan_filled_storage():
    """Torch fills every uninitialised allocation (``empty``/``empty_like``, hence to_empty) with NaN while on, as
    the CPU launch shim does for the gates' training runs: a tensor nothing writes is wrong the same way each run."""
    import torch

    was_on, was_fill = torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was_on, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = was_fill


def init_like_trainer(model):
    """Call the weight init the way the target's trainer does without ``training.load``. The real MindSpeed-MM calls
    its ``init_model_weights``: every module's ``_is_initialized`` and ``_is_hf_initialized`` set False, then
    ``model.init_weights()`` (its other step re-shards a padded embedding's DTensor, which an unsharded model has
    not, and it reads the DTensor's mesh, so the flags are reset here and the function itself not called). A target
    without that function (the stand-in) calls ``model.init_weights()`` after ModelHub's flag reset. Returns how."""
    try:
        from mindspeed_mm.fsdp.utils.utils import init_model_weights  # noqa: F401  (its presence decides the call)
        how = "init_model_weights"
    except ImportError:
        how = "init_weights"
    if how == "init_model_weights":
        for module in model.modules():
            module._is_initialized = False
            if getattr(module, "_is_hf_initialized", False):
                module._is_hf_initialized = False
    model.init_weights()
    return how


def meta_path(cls, config, batch, eager=None):
    """The trainer's ``init_model_with_meta_device`` on the plugin class: built on meta as ModelHub builds, storage
    from the target's own ``to_empty_if_needed`` (else ``Module.to_empty``, where a plugin override runs) with
    uninitialised memory NaN-filled, then one of the trainer's two continuations:
    - ``eager`` given (resumed load): ``init_weights`` skipped, the persistent state dict of the eagerly built model
      loaded (what a checkpoint of it holds). A tensor nothing rebuilt after to_empty (a non-persistent rotary
      ``inv_freq``, vision ``position_ids``) stays NaN here as in G5's load run;
    - no ``eager`` (fresh init, what a config without training.load trains): ``init_weights`` called as the trainer
      calls it, nothing loaded. A parameter the plugin's init leaves out (a vendored module's bare ``nn.Parameter``)
      stays NaN as in such a config's G4.
    Then the target's retie, the non-finite tensors named, and a forward for the loss."""
    import torch
    from _meta_init import build, materialize, persistent_keys, retie

    missing = unexpected = ()
    init = None
    with nan_filled_storage():
        model = build(cls, config, meta=True)
        how = materialize(model)
        if eager is None:
            if not callable(getattr(model, "init_weights", None)):
                return {"materialize": how, "init": None, "finite": False, "loss": None, "nonfinite": [],
                        "first_nonfinite": None, "error": f"{type(model).__name__} has no init_weights, which the "
                                                          "trainer calls after to_empty when training.load is unset"}
            init = init_like_trainer(model)
    if eager is not None:
        nonpersistent = set(persistent_keys(eager))  # (that helper returns the non-persistent names)
        state = {k: v for k, v in eager.state_dict().items() if k not in nonpersistent}
        missing, unexpected = model.load_state_dict(state, strict=False)
    retied = retie(model)
    bad = nonfinite_tensors(model)
    model.train()
    with torch.no_grad():
        output = model(**batch, use_cache=False)
    loss = getattr(output, "loss", None)
    value = float(loss.detach().float()) if loss is not None and hasattr(loss, "detach") else None
    result = {"materialize": how, "retie_embeddings": retied, "loss": value,
              "finite": value is not None and math.isfinite(value), "nonfinite": [f"{k} `{n}`" for k, n in bad[:20]],
              "first_nonfinite": bad[0][1] if bad else None, "first_nonfinite_kind": bad[0][0] if bad else None}
    if eager is not None:
        result.update(missing=list(missing)[:10], unexpected=list(unexpected)[:10])
    else:
        result["init"] = init
    return result


def guarded_meta_path(cls, config, batch, eager=None):
    """``meta_path`` timed; an exception there (an init_weights that raises) is that path's result, so the error
    still says which path raised it."""
    start = time.monotonic()
    try:
        result = meta_path(cls, config, batch, eager)
    except Exception as exc:  # probe boundary: the failure is the result
        result = {"error": f"{type(exc).__name__}: {exc}", "finite": False, "loss": None}
    result["seconds"] = round(time.monotonic() - start, 2)
    return result


# what rebuilds a tensor left non-finite on a resumed load, by the call that gave the storage
# (_meta_init.materialize): the target's to_empty_if_needed gives new storage to parameters only and never calls
# a to_empty override; Module.to_empty gives new storage to every tensor and runs the plugin's override.
# init_weights is skipped on a resumed load either way.
REBUILD_ADVICE = {
    "to_empty_if_needed": "The target's to_empty_if_needed kept its buffers as built, so this one never held a value: "
                          "compute it in __init__ from the config on a real device (not from a meta parameter), since "
                          "init_weights does not run on a resumed load and a to_empty override is never called",
    "Module.to_empty": "Module.to_empty gave it fresh storage and nothing rebuilt it, and init_weights does not run on "
                       "a resumed load: rebuild it in a to_empty override of the plugin class (parent first)",
}
FRESH_ADVICE = ("init_weights left it as to_empty gave it: initialise it in the plugin's init_weights / _init_weights "
                "(every module type and bare nn.Parameter the inherited _init_weights does not know; the inherited "
                "init_weights marks every module _is_hf_initialized, so an override must not skip modules by that "
                "flag), or compute it in __init__ where the storage call keeps it")
PATH_NAMES = {"fresh": ("fresh init (no load: the trainer's init_model_with_meta_device without training.load, "
                        "meta -> to_empty -> init_weights)", "after to_empty + init_weights"),
              "load": ("resumed load (init_model_with_meta_device with training.load, meta -> to_empty -> checkpoint "
                       "load, init_weights skipped, what G5's load run trains)", "after to_empty + loading the checkpoint")}


def meta_path_error(which, meta):
    """The failure of one meta path, named by the path, or None."""
    label, after = PATH_NAMES[which]
    if meta.get("error"):
        return f"{label}: {meta['error']}"
    if meta.get("first_nonfinite"):
        more = meta["nonfinite"][1:5]
        advice = FRESH_ADVICE if which == "fresh" else REBUILD_ADVICE.get(meta["materialize"],
                                                                          REBUILD_ADVICE["Module.to_empty"])
        return (f"{label}: {meta['first_nonfinite_kind']} `{meta['first_nonfinite']}` is not finite {after}"
                + (f" (also {', '.join(more)})" if more else "") + f"; loss {meta['loss']}. {advice}")
    if not meta.get("finite"):
        return f"{label}: loss is not finite ({meta.get('loss')}) although every tensor is finite {after}"
    return None


def forward_defined_at(model):
    """`` by Class.forward (defined in path)``: the file whose forward made the output the engine cannot read (the
    path relative to the target root, the probe's cwd), so the classify node places the cause in that file of the run
    (knowledge/failure_context.py, gate_remedy_owner); a forward of an installed library is named the same way and
    decides nothing there. Empty when the source file is unknown."""
    import inspect
    import os

    try:
        path = inspect.getsourcefile(type(model).forward)
    except (TypeError, AttributeError):
        path = None
    return f" by {type(model).__name__}.forward (defined in {os.path.relpath(path)})" if path else ""


def main(argv):
    args = parse(argv, extra_args)
    start = time.monotonic()
    params = None
    try:
        import torch

        torch.manual_seed(args.seed)
        cls, config, how = resolve(args)
        if args.weights and how == "transformers":
            model = cls.from_pretrained(args.model or args.model_name_or_path, config=config, dtype=torch.float32,
                                        trust_remote_code=args.trust_remote_code).float()
            from _meta_init import build, persistent_keys, restore_computed_buffers

            restore_computed_buffers(model, type(model), build, persistent_keys)  # remote code's buffers on the meta load
        else:
            if args.shrink_layers and how == "transformers":
                shrink_config(config, args.shrink_layers)
            model = instantiate(cls, config, meta=False)
        params, var_kw = forward_params(type(model))
        batch_source, sample_error = "synthetic", None
        if args.batch:
            batch, batch_source = load_batch(args.batch), "collated"
        elif args.sample_data and how == "transformers":
            try:
                batch, batch_source = sample_batch(args.model or args.model_name_or_path, args.sample_data, config,
                                                   params, args.trust_remote_code), "source processor"
            except Exception as exc:  # probe boundary: no usable processor -> synthetic batch
                sample_error = f"{type(exc).__name__}: {exc}"
        if batch_source == "synthetic":
            batch = synthetic_batch(config, params, args.seq_len, args.seed)
        batch = to_compute_dtype(batch, model)
        calls = count_vision_features(model) if args.media_token_id is not None else None
        model.train()
        try:
            output = model(**batch, use_cache=False)
        except Exception as exc:
            if sample_error is None:
                raise
            # the source's own processing made no batch and the forward cannot take a text-only one: no faithful
            # batch exists here, which is the finding (not a fault of the plugin the forward ran)
            emit({"error": f"no faithful batch: the source processor's batch failed ({sample_error}) and the forward "
                           f"rejects a text-only one ({error_with_place(exc)})", "no_faithful_batch": True,
                  "batch_source": batch_source, "sample_batch_error": sample_error})
            return 1
        meta = fresh = None
        if args.model_id and not args.no_meta_load and getattr(output, "loss", None) is not None:
            fresh = guarded_meta_path(cls, config, batch)
            meta = guarded_meta_path(cls, config, batch, eager=model)
    except Exception as exc:  # probe boundary: the failure is the result
        # where it was raised too: a bare "shape '[-1, 468]' is invalid" does not say which line asked for it; and
        # what the forward takes, when the model was built (the gate checks the batch's keys against it still)
        emit({"error": error_with_place(exc), **({"forward_params": params} if params is not None else {})})
        return 1
    loss = getattr(output, "loss", None)
    value = float(loss.detach().float()) if loss is not None and hasattr(loss, "detach") else None
    keys = list(output.keys()) if hasattr(output, "keys") else []
    result = {
        "loss": value, "finite": value is not None and math.isfinite(value), "has_loss_attr": loss is not None,
        "output_type": type(output).__name__, "output_keys": keys, "forward_params": params,
        "accepts_var_kwargs": var_kw, "batch_keys": sorted(batch), "model_class": f"{cls.__module__}.{cls.__qualname__}",
        "build": how, "seconds": round(time.monotonic() - start, 2), "batch_source": batch_source,
        "sample_batch_error": sample_error, "loss_labels": loss_labels(output, batch, value),
    }
    if calls is not None:
        hidden = text_hidden_size(model.config)
        rows = [feature_rows(c, hidden) for c in calls[-1:]] if calls else []
        result["vision"] = {
            "media_token_id": args.media_token_id,
            "media_tokens": int((batch["input_ids"] == args.media_token_id).sum()) if "input_ids" in batch else None,
            "features": rows[0] if rows else None, "calls": len(calls),
            "why_not": None if rows and rows[0] is not None else
            ("the forward called no get_image_features" if not calls else "feature width is not the text width")}
    if meta is not None:
        result["meta_fresh"], result["meta_load"] = fresh, meta
    if loss is None:
        result["error"] = (f"forward returned {type(output).__name__} without a .loss (the engine reads output.loss)"
                           + forward_defined_at(model))
    elif not result["finite"]:
        # a batch the source's own processor (or this probe) made: nothing of the run's data path or YAML fed it, so
        # the forward that made the loss is named; a collated batch (G2) is the data path's, and names nothing
        result["error"] = f"loss is not finite: {value}" + (forward_defined_at(model) if batch_source != "collated"
                                                            else "")
    elif meta is not None:
        # both paths' failures, fresh first (a config without training.load trains it before G5 loads): one plugin
        # fix may need to cover both; a fresh path the delivered config never takes is recorded, not failed
        fresh_error = meta_path_error("fresh", fresh)
        if fresh_error and args.fresh_untrained:
            result["fresh_note"], fresh_error = fresh_error, None
        errors = [e for e in (fresh_error, meta_path_error("load", meta)) if e]
        if errors:
            result["error"] = "; ".join(errors)
    emit(result)
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
