"""Shared by the module_tree and forward_smoke probes (runs in the target runtime; imports nothing from msmigrate).

Builds a model either from an HF folder (config -> class from ``architectures`` / ``auto_map``) or the way the
target's ModelHub would from a registered plugin class (plugins imported like the trainer: NON_MEGATRON=true, target
root on sys.path, ``training.plugin`` entries with ``/`` -> ``.``). Config shrinking keeps forward passes cheap.
"""
import argparse
import importlib
import inspect
import json
import os
import pkgutil
import sys
import types

RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "
LAYER_COUNT_KEYS = ("num_hidden_layers", "num_layers", "depth", "n_layers", "encoder_layers", "decoder_layers",
                    "num_encoder_layers", "num_decoder_layers")
AUTO_CLASS_ORDER = ("AutoModelForImageTextToText", "AutoModelForVision2Seq", "AutoModelForCausalLM", "AutoModel")


def emit(payload):
    print(RESULT_MARKER + json.dumps(payload, default=str), flush=True)


LIBRARY_PARTS = ("site-packages", "dist-packages", "/lib/python")


def raised_at(exc):
    """Where an exception came from, for an error observation that otherwise has only its message: the frame that
    raised it, and the innermost frame outside installed libraries (the plugin's or the remote code's line that
    called into torch / transformers), each as ``file:line in function``; None without a traceback."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        # the parser's place is the file it could not read; the traceback ends in the import machinery, and the
        # message names the file by its base name only
        frames.append(traceback.FrameSummary(exc.filename, exc.lineno, "<module>", line=exc.text or ""))
    if not frames:
        return None

    cwd = os.getcwd() + os.sep  # the probes run in the target root: its files are named as the read tools take them

    def label(fr):
        name = fr.filename[len(cwd):] if fr.filename.startswith(cwd) else fr.filename
        return f"{name}:{fr.lineno} in {fr.name}"

    own = [fr for fr in frames if not any(part in fr.filename for part in LIBRARY_PARTS)
           and os.path.basename(fr.filename) != os.path.basename(sys.argv[0] or "")]
    out = {"raised_in": label(frames[-1])}
    if own and own[-1] is not frames[-1]:
        out["called_from"] = label(own[-1])
        if own[-1].line:
            out["code"] = own[-1].line.strip()[:200]
    return out


def root_cause(exc, depth=5):
    """The innermost exception ``exc`` was explicitly raised from (``raise … from``), or None: a library that
    re-raises an import failure as its own message ("Could not import module …") keeps the real reason there. An
    exception merely raised while another was handled is not followed (that one was dealt with)."""
    cause = None
    while depth and exc is not None:
        exc = exc.__cause__
        cause, depth = exc or cause, depth - 1
    return cause


def _one_line(exc):
    where = raised_at(exc)
    text = f"{type(exc).__name__}: {exc}"
    if not where:
        return text
    place = f"raised in {where['raised_in']}"
    if where.get("called_from"):
        place += f"; called from {where['called_from']}" + (f": `{where['code']}`" if where.get("code") else "")
    return f"{text} ({place})"


def error_with_place(exc):
    """``Type: message (raised in …; called from … `code`)``: the message plus where, in one line, and the root
    cause the same way where the exception was raised from another."""
    cause = root_cause(exc)
    return _one_line(exc) + (f"; caused by {_one_line(cause)}" if cause is not None else "")


def add_source_args(ap):
    ap.add_argument("--model", help="HF model folder (config.json [+ modeling files])")
    ap.add_argument("--trust-remote-code", action="store_true")
    ap.add_argument("--target", help="target root, for a registered plugin class")
    ap.add_argument("--plugin", action="append", default=[], help="training.plugin entry (repeatable)")
    ap.add_argument("--model-id", help="model_register id of the plugin class")
    ap.add_argument("--model-name-or-path", help="model.model_name_or_path for the plugin class")
    ap.add_argument("--attn-implementation", default="eager")


def shrink_config(config, layers, span=False):
    """Cap every layer count (recursively into sub-configs) at ``layers`` and keep every field that indexes layers
    valid after the cut, found by structure rather than by name (``layer_index_fields``). The cut stack is the
    source's own layers (``kept_layers``): the first ``layers``, with one layer of every kind its per-layer string
    lists (``layer_types``) and per-layer overrides (transformers 5's ``per_layer_config``) hold, so a stack of
    sliding-attention layers with a full-attention one every sixth keeps that one (and its own head size); per-layer
    lists take the kept layers' entries and overrides move to the kept layers' new places. A list of layer indices
    (ints, all within the range of a count of its own config or of a config nested in it — a top-level
    ``vision_feature_layers`` indexes the vision tower) and a negative index keep their values where they are still
    in range and map the others proportionally into the new range (distinct stays distinct where it can).
    ``span=True`` cuts each stack instead to its first layers up to the last one it would keep (the source's own
    prefix that holds every kept layer: what a checkpoint's first shards are loaded into before the kept layers are
    taken from it). Returns the config; ``config._msmigrate_shrunk`` lists what changed and
    ``config._msmigrate_kept`` the kept old layers of each cut count (``path + key``)."""
    changed, kept = [], {}
    plan = []
    for node, path in _config_nodes(config):
        for key in LAYER_COUNT_KEYS:
            value = _get(node, key)
            if isinstance(value, int) and not isinstance(value, bool) and value > layers:
                sel = kept_layers(node, value, layers)
                if span:
                    sel = list(range(sel[-1] + 1))
                plan.append((node, path, key, value, sel))
                kept[f"{path}{key}"] = sel
    by_count = {(id(node), value): sel for node, _, _, value, sel in plan}
    indexing = layer_index_fields(config, layers, by_count)  # read against the counts before the cut
    moved = [(node, path, _overrides(node), by_count[(id(node), value)]) for node, path, key, value, _ in plan
             if key == "num_hidden_layers" and _overrides(node)]
    for node, path, key, value, sel in plan:
        _set(node, key, len(sel))
        changed.append(f"{path}{key}: {value} -> {len(sel)}" + ("" if sel == list(range(len(sel)))
                                                                 else f" (layers {sel})"))
    for node, path, key, value, new in indexing:
        _set(node, key, new)
        changed.append(f"{path}{key}: {value} -> {new}")
    for node, path, overrides, sel in moved:  # after the count: transformers checks the keys against it
        new = {place: overrides[old] for place, old in enumerate(sel) if old in overrides}
        _set_overrides(node, new)
        changed.append(f"{path}per_layer_config: {sorted(overrides)} -> {sorted(new)}")
    for name, value in (("_msmigrate_shrunk", changed), ("_msmigrate_kept", kept)):
        try:
            setattr(config, name, value)
        except AttributeError:  # a config that refuses new attributes: the records are only informative
            pass
    return config


def kept_state(span_state, model, kept):
    """The state dict of ``model`` (built from a config ``shrink_config`` cut; ``kept``: its ``_msmigrate_kept``)
    taken from ``span_state``, the state of the same class built from the config cut with ``span=True``: each
    tensor by its name, except that layer ``i`` of a cut layer list (a ModuleList of ``model`` whose entries in
    ``span_state`` reach further) is the span's layer ``kept[i]``, the kept layers being those of the cut count as
    long as that list and spanning as far. ValueError where two counts with different kept layers fit one list."""
    import torch

    remap = {}
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.ModuleList) or not name:
            continue
        reach = {int(k[len(name) + 1:].split(".", 1)[0]) for k in span_state
                 if k.startswith(name + ".") and k[len(name) + 1:].split(".", 1)[0].isdigit()}
        if not reach or max(reach) + 1 == len(module):
            continue
        fits = {tuple(sel) for sel in kept.values() if len(sel) == len(module) and sel[-1] == max(reach)}
        if len(fits) != 1:
            raise ValueError(f"{name}: {len(module)} layers cut from {max(reach) + 1}, kept layers "
                             f"{sorted(fits) or 'unknown'}")
        remap[name] = fits.pop()
    out = {}
    for key in model.state_dict():
        source_key = key
        for name, sel in remap.items():
            if key.startswith(name + "."):
                index, rest = key[len(name) + 1:].split(".", 1)
                source_key = f"{name}.{sel[int(index)]}.{rest}"
                break
        if source_key in span_state:
            out[key] = span_state[source_key]
    return out


def _overrides(node):
    """A heterogeneous config's per-layer overrides, {layer index: {field: value}} (transformers 5's
    ``per_layer_config``, kept on the config as its heterogeneity spec; a dict sub-config's own
    ``per_layer_config`` mapping); {} for a config without any (every config of transformers 4)."""
    if isinstance(node, dict):
        raw = node.get("per_layer_config")
    else:
        raw = getattr(vars(node).get("_heterogeneity_spec"), "per_layer_overrides", None)
    if not isinstance(raw, dict) or not all(str(k).isdigit() and isinstance(v, dict) for k, v in raw.items()):
        return {}
    return {int(k): dict(v) for k, v in raw.items()}


def _set_overrides(node, overrides):
    """Replace a config's per-layer overrides (transformers validates them against its layer count)."""
    if isinstance(node, dict):
        node["per_layer_config"] = {str(k): v for k, v in overrides.items()}
    else:
        node.per_layer_config = overrides or None


def kept_layers(node, count, layers):
    """The old layers (ascending) a stack of ``count`` layers cut to ``layers`` keeps: the first ``layers``, and the
    first layer of every kind they miss, where a layer's kind is its entries in the node's per-layer string lists
    (``layer_types``) with its per-layer overrides (where they index this count); a missing kind takes the place of
    the last kept layer whose kind is kept more than once, or is added where none is (a stack keeps one layer of
    every kind it has, even past ``layers``)."""
    lists = [v for k, v in _fields(node).items() if not str(k).startswith("_") and isinstance(v, (list, tuple))
             and len(v) == count and any(isinstance(x, str) for x in v)]
    overrides = _overrides(node) if _get(node, "num_hidden_layers") == count else {}

    def kind(i):
        return (tuple(x[i] if isinstance(x[i], str) else None for x in lists),
                repr(sorted(overrides.get(i, {}).items())))

    kinds = [kind(i) for i in range(count)]
    sel = list(range(min(layers, count)))
    for i in range(count):
        have = [kinds[j] for j in sel]
        if kinds[i] in have:
            continue
        twice = [place for place, k in enumerate(have) if have.count(k) > 1]
        if twice:
            sel[twice[-1]] = i
        else:
            sel.append(i)
        sel.sort()
    return sel


def _is_config(value):
    """A nested config: a PretrainedConfig, or a dict that carries a layer count of its own (remote code often keeps
    its sub-configs as dicts)."""
    if hasattr(value, "to_dict") and hasattr(value, "model_type"):
        return True
    return isinstance(value, dict) and any(isinstance(value.get(k), int) for k in LAYER_COUNT_KEYS)


def _fields(node):
    return node if isinstance(node, dict) else vars(node)


def _get(node, key):
    return node.get(key) if isinstance(node, dict) else getattr(node, key, None)


def _set(node, key, value):
    if isinstance(node, dict):
        node[key] = value
    else:
        setattr(node, key, value)


def _config_nodes(config, path=""):
    """(node, dotted path prefix) of the config and every config nested in it, each once, parents first."""
    seen, out = set(), []

    def visit(node, prefix):
        if id(node) in seen:
            return
        seen.add(id(node))
        out.append((node, prefix))
        for key, value in list(_fields(node).items()):
            if _is_config(value):
                visit(value, f"{prefix}{key}.")

    visit(config, path)
    return out


def _counts(node):
    """The layer counts a node itself declares (ints; before the cut when read before it)."""
    return [v for k in LAYER_COUNT_KEYS for v in [_get(node, k)] if isinstance(v, int) and not isinstance(v, bool)]


def _is_int_list(value):
    return isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(x, int) and not isinstance(x, bool) for x in value)


def _map_index(i, count, layers):
    """Index ``i`` into ``count`` layers (or hidden states: one more), moved into ``layers``: unchanged where still
    valid, else proportionally placed; negative indices stay negative (counted from the end)."""
    if -layers - 1 <= i <= layers - 1:
        return i
    if i >= 0:
        return min(layers - 1, i * layers // max(1, count))
    return -min(layers + 1, 1 + (-i - 1) * layers // max(1, count))


def layer_index_fields(config, layers, kept=None):
    """(node, path, key, old, new) for every field that indexes layers and would point past a tower cut to
    ``layers`` layers, computed against the counts as they are now (call before the counts are cut, as
    ``shrink_config`` does). Per-layer lists (any element type) are as long as a count of their own config, and take
    the entries of the layers ``kept[(id(node), count)]`` keeps (the first ``layers`` where it names none); index
    lists are flat int lists whose every value lies within a count's range (hidden states included: -count-1 ..
    count) of their own config or one nested in it (for a config with no tower of its own or below it, an adapter's:
    of any config in the tree), where that count is larger than ``layers``; negative int
    scalars in that range are indices counted from the end (a positive int scalar cannot be told from a size, so it
    is left alone)."""
    found = []
    every = [n for sub, _ in _config_nodes(config) for n in _counts(sub) if n > layers]
    for node, path in _config_nodes(config):
        own = [n for n in _counts(node) if n > layers]
        # a config with no tower of its own or below it (an adapter's) indexes a sibling's layers
        below = [n for sub, _ in _config_nodes(node) for n in _counts(sub) if n > layers] or every
        for key, value in list(_fields(node).items()):
            if key in LAYER_COUNT_KEYS or _is_config(value):
                continue
            if isinstance(value, (list, tuple)) and value and len(value) in own:
                sel = (kept or {}).get((id(node), len(value)), range(layers))
                found.append((node, path, key, value, type(value)(value[j] for j in sel)))  # one entry per layer
                continue
            if _is_int_list(value):
                count = next((n for n in sorted(below) if all(-n - 1 <= i <= n for i in value)), None)
                if count is None:
                    continue
                new = [_map_index(i, count, layers) for i in value]
                if len(set(value)) == len(value):
                    new = list(dict.fromkeys(new))  # distinct layers stay distinct (a duplicate would share one)
                if list(new) != list(value):
                    found.append((node, path, key, value, type(value)(new)))
            elif isinstance(value, int) and not isinstance(value, bool) and value < -layers - 1:
                count = next((n for n in sorted(below) if -n - 1 <= value), None)
                if count is not None:
                    found.append((node, path, key, value, _map_index(value, count, layers)))
    return found


def import_plugins(target, plugins):
    """Import plugin entries like the trainer's import_plugin (package + every non-package submodule)."""
    os.environ["NON_MEGATRON"] = "true"
    root = os.path.abspath(target)
    if root not in sys.path:
        sys.path.insert(0, root)
    for entry in plugins:
        name = entry.replace("/", ".").strip(".")
        pkg = importlib.import_module(name)
        if hasattr(pkg, "__path__"):
            for _, sub, is_pkg in pkgutil.walk_packages(pkg.__path__, prefix=name + "."):
                if not is_pkg:
                    importlib.import_module(sub)


def registry_dict(register):
    """The id -> object dict inside a Register (``_registry`` in MindSpeed-MM; any dict attribute otherwise)."""
    table = getattr(register, "_registry", None)
    if isinstance(table, dict):
        return table
    for value in vars(register).values():
        if isinstance(value, dict):
            return value
    return {}


def model_args_for(model_id, model_name_or_path, attn):
    """A ModelArguments like the trainer's (the target's own class if importable), for custom-path classes."""
    try:
        from mindspeed_mm.fsdp.params.model_args import ModelArguments

        return ModelArguments(model_id=model_id, model_name_or_path=model_name_or_path, attn_implementation=attn)
    except Exception:  # probe boundary: any target without that class gets a plain namespace
        return types.SimpleNamespace(model_id=model_id, model_name_or_path=model_name_or_path,
                                     attn_implementation=attn, trust_remote_code=False, freeze=[])


def resolve(args):
    """-> (cls, config_or_model_args, how). ``how`` is 'transformers' (HF config) or 'custom' (ModelArguments)."""
    import transformers

    if args.model_id:
        import_plugins(args.target, args.plugin)
        from _single_rank import start_single_rank

        start_single_rank()  # a target model may ask get_parallel_state() for its groups in forward
        register = importlib.import_module("mindspeed_mm.fsdp.utils.register")
        cls = registry_dict(register.model_register).get(args.model_id)
        if cls is None:
            raise KeyError(f"ID '{args.model_id}' is not registered.")
        try:
            config = transformers.AutoConfig.from_pretrained(
                args.model_name_or_path, trust_remote_code=args.trust_remote_code,
                _attn_implementation=args.attn_implementation)
        except Exception:  # like ModelHub: any AutoConfig failure -> custom path
            return cls, model_args_for(args.model_id, args.model_name_or_path, args.attn_implementation), "custom"
        if callable(getattr(cls, "overwrite_transformer_config", None)):
            # as ModelHub does before it builds (model_parity does too); without it a plugin that sets a token id
            # there builds differently here than in training (live run 8 patched its plugin around the difference)
            config = cls.overwrite_transformer_config(config, model_args_for(
                args.model_id, args.model_name_or_path, args.attn_implementation), None)
        return cls, config, "transformers"
    config = transformers.AutoConfig.from_pretrained(args.model, trust_remote_code=args.trust_remote_code)
    config._attn_implementation = args.attn_implementation
    archs = getattr(config, "architectures", None) or []
    cls = getattr(transformers, archs[0], None) if archs else None
    auto_map = getattr(config, "auto_map", None) or {}
    if cls is None and args.trust_remote_code and auto_map:
        from transformers.dynamic_module_utils import get_class_from_dynamic_module

        for key in AUTO_CLASS_ORDER:
            if key in auto_map:
                cls = get_class_from_dynamic_module(auto_map[key], args.model)
                break
    if cls is None:
        for key in AUTO_CLASS_ORDER:
            auto = getattr(transformers, key)
            try:
                cls = auto._model_mapping[type(config)]
                break
            except KeyError:
                continue
    if cls is None:
        raise ValueError(f"no model class for {type(config).__name__} (architectures={archs})")
    return cls, config, "transformers"


def with_attention_fallback(make, config):
    """``make()``; where the class has no path for the asked attention implementation (the plugin checks ask for
    sdpa, as the CPU launches do), ``make()`` again with eager, which every class has: the built model's
    ``attention_support`` then shows what it lacks, and the drafted config asks for what it supports."""
    try:
        return make()
    except ValueError as exc:
        asked = getattr(config, "_attn_implementation", None)
        if "attention implementation" not in str(exc) or asked in (None, "eager"):
            raise
        config._attn_implementation = "eager"
        return make()


def instantiate(cls, config, meta):
    """``cls`` built from ``config`` (on meta), with eager where the class has no sdpa path."""
    import contextlib

    import torch

    def build():
        with torch.device("meta") if meta else contextlib.nullcontext():
            return cls._from_config(config) if hasattr(cls, "_from_config") else cls(config)

    return with_attention_fallback(build, config).float()


def to_compute_dtype(batch, model):
    """Floating tensors of ``batch`` (pixels, media features) in the dtype the model computes in: a processor that
    returns bf16 pixels must not fail an fp32 forward, nor an fp32 one a bf16 forward. Integer tensors (ids, grids,
    masks) are left as they are."""
    import torch

    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
    if dtype is None:
        return batch
    return {k: v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in batch.items()}


def forward_params(cls):
    """(names of forward's named parameters, accepts **kwargs). A forward that names nothing and passes
    ``*args, **kwargs`` on (a wrapper over its base class's forward, as a plugin override often is) takes what the
    next forward up the class hierarchy names: the trainer calls it with the whole batch."""
    for klass in getattr(cls, "__mro__", (cls,)):
        forward = klass.__dict__.get("forward") if klass is not cls else getattr(cls, "forward", None)
        if forward is None:
            continue
        try:
            params = list(inspect.signature(forward).parameters.values())
        except (TypeError, ValueError):
            return [], False
        names = [p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name != "self"]
        var_kw = any(p.kind == p.VAR_KEYWORD for p in params)
        if names or not var_kw:
            return names, var_kw
    return [], True


def parse(argv, extra=None):
    ap = argparse.ArgumentParser()
    add_source_args(ap)
    if extra:
        extra(ap)
    args = ap.parse_args(argv)
    if not args.model and not args.model_id:
        ap.error("give --model <hf folder> or --target/--plugin/--model-id")
    return args
