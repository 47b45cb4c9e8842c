"""A sample drawn twice (gate G2, used by ``data_check``; runs in the target runtime, imports nothing from msmigrate).

The target trainer's data iterator is cyclic (MindSpeed-MM's ``build_iterations``: the dataloader is iterated again
when it ends), so past the first epoch every sample is drawn and collated a second time. The real framework's
multimodal collator pops ``images`` / ``videos`` / ``audios`` from the features it is handed and rebinds the first
feature's ``input_ids`` (a batch without media gets the tokens of a blank fake image appended). Its own datasets build
a new dict on every ``__getitem__``, so nothing of that stays; a dataset that hands out the dicts it stores (a list of
prepared examples) keeps the change: on its second draw the sample has lost its images, the collator adds its fake
image, and the row holds its own image tokens and the fake one's against one image's features. The first epoch
trains; the second fails in the forward, or trains on a blank image where the counts agree. No check that collates
each sample once sees it (G4's 5-step launch on 16 samples did not; its 20-step training parity did, as an
``IMG_CONTEXT tokens ... but ... image feature rows`` error in the model). One collation shows it: each drawn sample
is read again from the dataset after its batch was collated and compared with the sample read before. A key whose
value differs between two reads before the collation (random augmentation in ``__getitem__``) is not counted."""
import copy


def fingerprint(value):
    """A comparable, hashable summary of a sample's value: containers item by item, exact scalars and strings,
    tensors and arrays by shape and dtype (integer tensors by their values too), other objects by type and size."""
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), fingerprint(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return ("list", tuple(fingerprint(v) for v in value))
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):
        floating = getattr(value, "is_floating_point", None)
        exact = (not floating()) if callable(floating) else getattr(value.dtype, "kind", "f") in "iub"
        return ("array", tuple(shape), str(value.dtype), tuple(value.reshape(-1).tolist()) if exact else None)
    return ("object", type(value).__name__, str(getattr(value, "size", "")))


def sample_prints(example):
    return {str(k): fingerprint(v) for k, v in dict(example).items()} if hasattr(example, "keys") else {}


def _length(value):
    return len(value) if isinstance(value, (list, tuple)) else None


def change(before, after, example_before, example_after, unstable):
    """What differs between two reads of one sample (keys in ``unstable`` left out): keys gone, keys added, values
    changed (with lengths where they are sequences)."""
    parts = []
    gone = sorted(k for k in before if k not in after and k not in unstable)
    added = sorted(k for k in after if k not in before and k not in unstable)
    if gone:
        parts.append(f"keys gone: {', '.join(gone)}")
    if added:
        parts.append(f"keys added: {', '.join(added)}")
    for key in sorted(k for k in before if k in after and k not in unstable and before[k] != after[k]):
        a, b = _length(example_before.get(key)), _length(example_after.get(key))
        if before[key] is None or after[key] is None:
            parts.append(f"{key} {'None' if before[key] is None else 'set'} → "
                         f"{'None' if after[key] is None else 'set'}")
        else:
            parts.append(f"{key} changed" + (f" ({a} → {b} items)" if a is not None and b is not None else ""))
    return "; ".join(parts)


def redraw_check(dataset, indices, collate_fn, defined_at):
    """Collate ``dataset[i]`` for ``indices`` as the trainer does (the dataset's own objects) and read them again.
    -> (the batch, the samples as read before the collation (deep copies: what the other checks compare), the record
    ``{"samples", "changed": [{"sample", "change"}], "unstable_keys", "problems"}``). ``defined_at(obj)`` names an
    object's class and file for the message."""
    examples = [dataset[i] for i in indices]
    try:
        kept = copy.deepcopy(examples)
    except (TypeError, copy.Error, RuntimeError):  # an object that does not copy: the checks then read the originals
        kept = None
    first = [sample_prints(e) for e in examples]
    second = [sample_prints(dataset[i]) for i in indices]
    unstable = sorted({k for a, b in zip(first, second) for k in set(a) | set(b) if a.get(k) != b.get(k)})
    batch = dict(collate_fn(examples))
    changed = []
    for n, i in enumerate(indices):
        again = dataset[i]
        what = change(first[n], sample_prints(again), (kept or examples)[n], again, set(unstable))
        if what:
            changed.append({"sample": i, "change": what})
    problems = []
    if changed:
        c = changed[0]
        problems.append(
            f"sample {c['sample']} read from the dataset again after its batch was collated is not the sample read "
            f"before ({c['change']}; {len(changed)} of {len(indices)} samples drawn): the collator "
            f"{defined_at(collate_fn)} (or the one it calls) changes the samples it is handed, and the dataset "
            f"{defined_at(dataset)} hands out the objects it keeps rather than new ones, so the change stays in the "
            "dataset. The trainer's data iterator is cyclic: from the second epoch on this sample collates to "
            "another batch than in the first (a sample whose images were popped gets the collator's blank fake "
            "image, its own image tokens still in the row). Return a new dict from the dataset's __getitem__ (a copy "
            "of the stored sample)")
    record = {"samples": len(indices), "changed": changed, "unstable_keys": unstable, "problems": problems}
    return batch, kept if kept is not None else examples, record
