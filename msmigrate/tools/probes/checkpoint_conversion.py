"""Probe (plan): does the source's checkpoint hold the model's parameters key by key, or does transformers itself
convert it at load? If it converts, write the converted checkpoint (the source's own load, saved in the model's
layout) so that a loader that maps one key to one parameter name — the target's HF loader — can fill every parameter.
Runs in the target runtime; imports nothing from msmigrate.

    python checkpoint_conversion.py --model <source folder> [--trust-remote-code] [--out <folder>]
                                    [--max-shard-size 5GB]

Detection is transformers' own: the conversion mapping its ``from_pretrained`` applies to the source class
(``transformers.conversion_mapping.get_model_conversion_mapping``, transformers 5; a release without that module
loads checkpoints key by key, so nothing converts there), asked on a meta build of the class, and every checkpoint key
(the safetensors headers: ``model.safetensors`` or the index's ``weight_map``) renamed the way ``from_pretrained``
renames it (``rename_source_key``). A key that a ``WeightConverter`` with operations matches is one transformers may
change at load — several tensors merged into one (per-expert ``experts.N.gate_proj`` + ``up_proj`` into a fused
``experts.gate_up_proj``, split q/k/v into one conv), a tensor renamed and changed (a rope permutation) — or may leave
as it is (a ``Transpose(check_dims=True)`` of fused experts already in the model's shape). So, only where a converter
matches, the source is loaded (``from_pretrained``, its own load) and compared with what a key-by-key loader would
write (the same renamings, no ops): a parameter no key reaches by name, or a key whose tensor differs (dtype, shape,
bits) from the loaded one, makes the conversion needed. Otherwise — no converter matches, or none changes anything —
the result says so and no file is written.

Conversion is the source's own load: ``from_pretrained`` of the source class in the checkpoint's dtype, its state
dict written with ``huggingface_hub.save_torch_state_dict`` (size-capped shards and an index, as the hub's; one tensor
per tied group, the name the source shipped) under keys that transformers' renamings (what a key-by-key loader reads
from it, and what ``from_pretrained`` applies) map onto the state-dict names: the name itself, or — where a family's
renamings would rename the name again — the name taken back through them. Then every written tensor is read back and compared with the loaded model's (dtype and bits), and every state-dict entry must be written
or tied to a written one. Memory: not streamed — the whole loaded model is in RAM once, plus the shard being written,
plus the pages mapped from the source's and the written files (page cache, reclaimable). Measured (benchmarks/
RESULTS.md): a 216 MiB bf16 checkpoint peaked at 1.05 GB RSS in one 5 GB shard, 0.93 GB in 100 MB shards, of which
0.35 GB are the imports: about 2.7–3.3× the checkpoint on top of them.

Result: ``transformers`` (version), ``mapping`` (whether the release has one), ``converters`` (source patterns →
target pattern, operations) that match checkpoint keys, ``converted_keys`` (how many checkpoint keys they match),
where any matches ``unreached`` / ``changed`` (names, first 20, and their counts), ``needed``; with ``--out`` and ``needed``: ``out``, ``files``, ``bytes``, ``tensors``, ``bit_equal``,
``unwritten`` (state-dict names neither written nor tied to a written name), ``keys_not_names`` (written keys that are
not the name they load into), ``max_rss_mb``, ``seconds``.
"""
import json
import os
import resource
import sys
import time

from _model_build import emit, error_with_place, parse, resolve

RECORD = "msmigrate_conversion.json"


def extra_args(ap):
    ap.add_argument("--out", help="where to write the converted checkpoint (only when a conversion is needed)")
    ap.add_argument("--max-shard-size", default="5GB")


def checkpoint_files(folder):
    """{tensor name: the file holding it}, from the safetensors headers (nothing loaded)."""
    from safetensors import safe_open

    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as f:
            return {k: os.path.join(folder, v) for k, v in json.load(f)["weight_map"].items()}
    single = os.path.join(folder, "model.safetensors")
    if not os.path.isfile(single):
        return {}
    with safe_open(single, framework="pt") as f:
        return {k: single for k in f.keys()}


def converting_transforms(cls, config, keys):
    """(mapping available, [(source patterns, target patterns, operation names, matched key count)], {name a key
    reaches by the renamings alone: the key}): the ``WeightConverter`` entries with operations that
    ``from_pretrained`` applies to some checkpoint key, and where a key-by-key loader (renamings, no ops) puts each."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightConverter, WeightRenaming, rename_source_key
    except ImportError:  # transformers 4.x: no conversion ops, the checkpoint holds the module layout
        return False, [], {}
    from accelerate import init_empty_weights

    with init_empty_weights():
        model = cls._from_config(config)
    transforms = get_model_conversion_mapping(model)
    renamings = [t for t in transforms if isinstance(t, WeightRenaming)]
    converters = [t for t in transforms if isinstance(t, WeightConverter)]
    meta = model.state_dict()
    counts, by_name = {}, {}
    for key in keys:
        _, pattern = rename_source_key(key, renamings, converters, model.base_model_prefix, meta)
        if pattern is not None:
            counts[pattern] = counts.get(pattern, 0) + 1
        by_name[rename_source_key(key, renamings, [], model.base_model_prefix, meta)[0]] = key
    found = []
    for conv in converters:
        hits = sum(counts.get(p, 0) for p in conv.source_patterns)
        entry = (list(conv.source_patterns), list(conv.target_patterns), [type(o).__name__ for o in conv.operations])
        if hits and conv.operations and entry not in [f[:3] for f in found]:
            found.append((*entry, hits))
    return True, found, by_name


def storage_groups(state):
    """The state dict's names grouped by shared storage (a tied pair is one group)."""
    groups = {}
    for key, tensor in state.items():
        groups.setdefault((tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape)),
                          []).append(key)
    return list(groups.values())


def load_differences(state, files, by_name):
    """(names no checkpoint key reaches by the renamings alone, names a key reaches whose loaded tensor differs from
    the key's own — dtype, shape or bits): what transformers' conversion changed that a key-by-key loader would not.
    A tied name counts as reached when another name of its group is."""
    import torch
    from safetensors import safe_open

    unreached, changed = [], []
    for group in storage_groups(state):
        reached = [n for n in group if n in by_name]
        if not reached:
            unreached += group
            continue
        name = reached[0]
        with safe_open(files[by_name[name]], framework="pt") as f:
            raw = f.get_tensor(by_name[name])
        ref = state[name]
        if raw.dtype != ref.dtype or raw.shape != ref.shape or not torch.equal(raw, ref):
            changed.append(name)
    return unreached, changed


def load_kwargs(transformers):
    """``dtype="auto"`` under the name the release takes: the checkpoint's own dtype, never a cast."""
    major = int(transformers.__version__.split(".")[0])
    return {"dtype": "auto"} if major >= 5 else {"torch_dtype": "auto"}


def written_tensors(out):
    from safetensors import safe_open

    names = [n for n in sorted(os.listdir(out)) if n.endswith(".safetensors")]
    for name in names:
        with safe_open(os.path.join(out, name), framework="pt") as f:
            for key in f.keys():
                yield name, key, f.get_tensor(key)


def renaming(model):
    """(forward, reverse): a key renamed by the model's ``WeightRenaming`` entries alone, as ``from_pretrained``
    renames it (and a key-by-key loader that reads transformers' renamings), and a name taken back through them."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import WeightRenaming, rename_source_key

    renamings = [t for t in get_model_conversion_mapping(model) if isinstance(t, WeightRenaming)]
    backwards = [t.reverse_transform() for t in renamings[::-1]]
    return (lambda key: rename_source_key(key, renamings, [])[0],
            lambda name: rename_source_key(name, backwards, [], reverse=True)[0])


def loader_keys(state, by_name, model):
    """{checkpoint key: state-dict name} for the converted checkpoint, one tensor per tied group (the name the source
    shipped where it shipped one), and the names no key reaches. A key is the name itself where the renamings leave
    it as it is, else the name taken back through them (a family whose renamings are not idempotent: mistral_large4's
    ``.mlp.`` becomes ``.mlp.mlp.`` again), and it must rename forward to the name."""
    forward, backward = renaming(model)
    keys, unreachable = {}, []
    for group in storage_groups(state):
        name = next((n for n in group if n in by_name), group[0])
        key = name if forward(name) == name else backward(name)
        if forward(key) == name:
            keys[key] = name
        else:
            unreachable.append(name)
    return keys, unreachable


def standalone(tensor):
    """``tensor`` as a tensor that owns its storage: a view of a larger storage (a fused q/k/v that the load split
    into chunks) is copied, since a safetensors save refuses tensors that share storage without covering it whole."""
    tensor = tensor.detach()
    if tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size() and tensor.is_contiguous():
        return tensor
    return tensor.contiguous().clone()


def write_converted(model, by_name, args, result):
    """The loaded model written under keys a key-by-key loader maps onto its names, then read back and compared bit
    for bit."""
    import torch
    import transformers
    from huggingface_hub import save_torch_state_dict

    state = model.state_dict()
    keys, unreachable = loader_keys(state, by_name, model)
    os.makedirs(args.out, exist_ok=True)
    save_torch_state_dict({key: standalone(state[name]) for key, name in keys.items()}, args.out,
                          max_shard_size=args.max_shard_size)
    model.config.save_pretrained(args.out)
    seen, mismatched, size, files = set(), [], 0, set()
    for name, key, tensor in written_tensors(args.out):
        files.add(name)
        size += tensor.numel() * tensor.element_size()
        ref = state.get(keys.get(key))
        if ref is None or ref.dtype != tensor.dtype or ref.shape != tensor.shape or not torch.equal(ref, tensor):
            mismatched.append(key)
        seen.add(keys.get(key))
    # a tied name shares storage with a written one
    unwritten = [k for group in storage_groups(state) if not seen.intersection(group) for k in group]
    renamed = {k: n for k, n in keys.items() if k != n}
    result.update(out=args.out, files=sorted(files), bytes=size, tensors=len(seen), mismatched=mismatched[:20],
                  bit_equal=not mismatched, unwritten=unwritten[:20], unwritten_count=len(unwritten),
                  keys_not_names=dict(list(renamed.items())[:20]), keys_not_names_count=len(renamed))
    record = {"source": os.path.abspath(args.model), "transformers": transformers.__version__,
              "model_class": result["model_class"], "converters": result["converters"],
              "tensors": len(seen), "keys_not_names": len(renamed), "bit_equal": not mismatched}
    with open(os.path.join(args.out, RECORD), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2)
    if mismatched or unwritten or unreachable:
        result["error"] = (f"the converted checkpoint in {args.out} does not hold what the source's own load holds: "
                           f"{len(mismatched)} tensor(s) differ (e.g. {', '.join(mismatched[:3])}), {len(unwritten)} "
                           f"state-dict entr(ies) unwritten (e.g. {', '.join(unwritten[:3])}; no key transformers' "
                           f"renamings map onto {', '.join(unreachable[:3]) or 'none'})")


def main(argv):
    args = parse(argv, extra_args)
    start = time.monotonic()
    result = {"model": args.model}
    try:
        import transformers

        result["transformers"] = transformers.__version__
        cls, config, _ = resolve(args)
        result["model_class"] = f"{cls.__module__}.{cls.__qualname__}"
        files = checkpoint_files(args.model)
        result["mapping"], found, by_name = converting_transforms(cls, config, sorted(files))
        result["checkpoint_keys"] = len(files)
        result["converters"] = [{"source": s, "target": t, "operations": o, "keys": n} for s, t, o, n in found]
        result["converted_keys"] = sum(n for *_, n in found)
        result["needed"] = False
        if found:  # the ops may leave this checkpoint as it is (a transpose only where the shape asks for one)
            model = cls.from_pretrained(args.model, trust_remote_code=args.trust_remote_code,
                                        **load_kwargs(transformers))
            unreached, changed = load_differences(model.state_dict(), files, by_name)
            result.update(unreached=unreached[:20], unreached_count=len(unreached), changed=changed[:20],
                          changed_count=len(changed), needed=bool(unreached or changed))
            if result["needed"] and args.out:
                write_converted(model, by_name, args, result)
    except Exception as exc:  # probe boundary: what failed is the result
        result.update(error=error_with_place(exc))
    result["seconds"] = round(time.monotonic() - start, 2)
    result["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    emit(result)
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
