"""Batch parity (gate G2), used by ``data_check`` (runs in the target runtime; imports nothing from msmigrate).

Data parity (``_data_parity``) compares each MAPPED example with the source's own processing; the trainer trains on
the COLLATED batch. Two things happen between them that no example-level check sees:

- collation: the collator pads the rows to one length and may add positions of its own (a fake image for a
  text-only batch). It must not change which positions train: each row must hold its example's ids, the positions
  that were trained in the example (already checked against the source) must be the trained positions of the row,
  and every position the collator added must carry the loss's ignore index. A collator that pads labels with the
  pad id trains the padding (``collation_parity``). The attention mask likewise: the example's own positions keep
  the example's mask, and no padding position is attended — the source attends none (``attention_parity``);
- media inputs: the mm_plugin opens and converts the images and the processor's image processor makes the pixel
  values at collate time. They must be the source processor's for the same images (``media_input_parity``). The
  real samples' images may not tell colour handling apart (a grey square is the same in any mode), so the same
  check also runs on a probe image the same size as the sample's: a smooth colour gradient, whose pixel values
  change under any channel conversion and barely under a second resampling. It goes through the collator as the
  sample's image (same size, so the media tokens stay the ones mapped). Last, the gradient at the sample's area with
  twice its aspect ratio: the source processor keeps the aspect ratio in its image grid, so an mm_plugin that
  resizes every image to one fixed size shows there as another grid, where the sample's size and a smooth image
  hide it (``aspect_probe``).

Tensors are compared where the source and the batch carry the same key: integer tensors exactly, float tensors by
the mean absolute difference relative to the source's mean magnitude (bf16 rounding is ~0.4 %, a second resampling
of a smooth image a few %; a colour conversion is tens of %). A shape that differs is recorded as not comparable
(the media-token parity reports a different image size), not as a failure.
"""
import os

IGNORE = -100  # the loss's ignore index (torch's cross_entropy default, the one transformers' losses pass)
RELATIVE_TOLERANCE = 0.05
# an image the data path's pixel bounds resize before the processor: fp32 values through the same processor, so
# anything above rounding is the resize (a 448x448 image clamped to 4096 pixels and re-enlarged differs by tens of %)
RESIZED_TOLERANCE = 1e-4
PIXEL_BOUNDS = ("image_max_pixels", "image_min_pixels")


def defined_at(obj):
    """``Class (defined in path)`` of an object of the target's pipeline (the path relative to the target root), for
    the message: the classify node places the cause in that file of the run (knowledge/failure_context.py)."""
    import inspect

    cls = type(obj)
    try:
        path = os.path.relpath(inspect.getsourcefile(cls) or "?")
    except (TypeError, ValueError):
        path = cls.__module__
    return f"{cls.__name__} (defined in {path})"


def find_attribute(obj, name, depth=3):
    """The first attribute ``name`` on ``obj`` or on the objects its attributes hold, ``depth`` levels down (a
    collator wrapping the framework's collator, which holds the template, which holds the mm_plugin)."""
    seen, level = set(), [obj]
    for _ in range(depth):
        nxt = []
        for o in level:
            if id(o) in seen or o is None:
                continue
            seen.add(id(o))
            if getattr(o, name, None) is not None:
                return getattr(o, name)
            nxt += [v for v in vars(o).values() if hasattr(v, "__dict__") and not isinstance(v, type)] \
                if hasattr(o, "__dict__") else []
        level = nxt
    return None


def _find(row, ids, media_id=None):
    """Where ``ids`` stands in ``row`` (right padding first, then left, then anywhere), or None. A position where the
    example holds ``media_id`` may hold another id in the row: a collator may write the model's own media marking
    there (Phi-3-V's processor numbers each image's positions -1, -2, ...), which the forward replaces by the vision
    features; every text position must be the example's."""
    n = len(ids)
    for start in (0, len(row) - n, *range(1, len(row) - n)):
        if 0 <= start <= len(row) - n and all(a == b or (media_id is not None and a == media_id)
                                              for a, b in zip(ids, row[start:start + n])):
            return start
    return None


def _named(collate_fn):
    """`` Class (defined in path)`` of the collator that made the batch, or nothing when the probe was not given it."""
    return f" {defined_at(collate_fn)}" if collate_fn is not None else ""


def _vocab_size(tokenizer):
    """How many ids the tokenizer hands out (added tokens included); None when it cannot say."""
    try:
        return len(tokenizer) if tokenizer is not None else None
    except TypeError:
        return None


def collation_parity(examples, batch, collate_fn=None, media_id=None):
    """Problems and figures: each collated row against its example (trained positions, added positions); with
    ``media_id`` (the example's media token), the media positions the collator re-marked are counted, not failed."""
    import torch

    if not all(isinstance(batch.get(k), torch.Tensor) and batch[k].dim() == 2 for k in ("input_ids", "labels")):
        return {"compared": 0, "why_not": "the batch has no input_ids / labels rows", "problems": []}
    rows_ids, rows_labels = batch["input_ids"].tolist(), batch["labels"].tolist()
    mask = batch.get("attention_mask")
    masks = mask.tolist() if isinstance(mask, torch.Tensor) and mask.dim() == 2 else None
    tokenizer = find_attribute(collate_fn, "tokenizer") if collate_fn is not None else None
    pad_id = getattr(tokenizer, "pad_token_id", None)
    problems, compared, padded, remarked = [], 0, 0, 0
    for i, example in enumerate(examples[:len(rows_ids)]):
        if example.get("input_ids") is None or example.get("labels") is None:
            continue  # a collator that tokenizes itself (raw text + audio examples): nothing mapped to compare with
        ids, labels = list(example["input_ids"]), list(example["labels"])
        row, row_labels = rows_ids[i], rows_labels[i]
        start = _find(row, ids, media_id)
        if start is None:
            problems.append(f"row {i} of the collated batch does not hold example {i}'s {len(ids)} input ids "
                            f"(the collator{_named(collate_fn)} rewrote them)")
            continue
        compared += 1
        remarked += sum(1 for a, b in zip(ids, row[start:start + len(ids)]) if a != b)
        inside = row_labels[start:start + len(ids)]
        moved = [j for j, (a, b) in enumerate(zip(labels, inside)) if (a != IGNORE) != (b != IGNORE) or
                 (a != IGNORE and a != b)]
        if moved:
            problems.append(f"row {i}: the collator{_named(collate_fn)} changed {len(moved)} of example {i}'s labels "
                            f"(first at position {moved[0]}: {labels[moved[0]]} -> {inside[moved[0]]})")
        added = [j for j in range(len(row)) if not start <= j < start + len(ids)]
        padded += len(added)
        vocab = _vocab_size(tokenizer)
        outside = [j for j in added if row[j] < 0 or (vocab and row[j] >= vocab)]
        if outside:
            values = sorted({row[j] for j in outside})
            problems.append(f"row {i}: {len(outside)} of the {len(added)} positions the collator added (padding) hold "
                            f"input id(s) {values[:4]}, outside the tokenizer's vocabulary [0, {vocab or '?'}): no "
                            f"embedding row exists for them; the collator{_named(collate_fn)} pads input_ids with "
                            + ("the labels' ignore index" if IGNORE in values else "a value that is no token id")
                            + f" instead of the tokenizer's pad id ({pad_id})")
        problems += attention_parity(i, example, masks[i] if masks else None, start, added, row, pad_id,
                                     collate_fn)
        trained = [j for j in added if row_labels[j] != IGNORE]
        if trained:
            values = sorted({row_labels[j] for j in trained})
            problems.append(f"row {i}: {len(trained)} of the {len(added)} positions the collator added (padding) "
                            f"train: their labels are {values[:4]}, not the loss's ignore index {IGNORE}; the "
                            f"collator{_named(collate_fn)} pads the labels with a token id instead of the "
                            "ignore index (its label_pad_token_id), so the model learns to predict padding")
    return {"compared": compared, "added_positions": padded, "media_positions_remarked": remarked,
            "problems": problems}


def attention_parity(i, example, row_mask, start, added, row, pad_id, collate_fn=None):
    """The collated row's attention mask against what the source attends: the source processes each sample on its
    own (or pads with its processor, whose mask is 0 on padding), so it attends exactly the example's own positions
    as the example's mask says, and never a padding position. A padding position is one the collator added that
    holds the tokenizer's pad id (a fake image the collator adds holds media tokens: not padding)."""
    if row_mask is None:
        return []
    out = []
    own = example.get("attention_mask")
    if own is not None:
        inside = row_mask[start:start + len(own)]
        changed = [j for j, (a, b) in enumerate(zip(own, inside)) if bool(a) != bool(b)]
        if changed:
            out.append(f"row {i}: the collator{_named(collate_fn)} changed the attention mask at {len(changed)} of "
                       f"example {i}'s own positions (first at {changed[0]}: {own[changed[0]]} -> "
                       f"{inside[changed[0]]})")
    if pad_id is None:
        return out
    padding = [j for j in added if row[j] == pad_id]
    attended = [j for j in padding if row_mask[j]]
    if attended:
        out.append(f"row {i}: {len(attended)} of the {len(padding)} padding positions the collator added are "
                   f"attended (attention_mask {row_mask[attended[0]]}, not 0): the source attends a sample's own "
                   f"tokens only (its processor pads the mask with 0); the collator{_named(collate_fn)} pads the "
                   "attention_mask with 1, so the model attends padding")
    return out


def gradient_image(size):
    """A smooth colour gradient of ``size``: red along x, green along y, blue against both."""
    from PIL import Image

    w, h = size
    img = Image.new("RGB", (w, h))
    img.putdata([(int(255 * x / max(1, w - 1)), int(255 * y / max(1, h - 1)),
                  int(255 * (1 - (x + y) / max(1, w + h - 2)))) for y in range(h) for x in range(w)])
    return img


def compare_tensors(source, target):
    """(problems, figures) for the media keys both carry as tensors: not the per-token ones (the ids, the mask, a
    token type per position: their last dimension is the source's sequence length), which data parity compares."""
    import torch

    problems, figures = [], {}
    length = tuple(source["input_ids"].shape)[-1] if isinstance(source.get("input_ids"), torch.Tensor) else None
    for key in sorted(set(source) & set(target)):
        a, b = source[key], target[key]
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or key == "labels" or \
                (a.dim() and a.shape[-1] == length):
            continue
        if tuple(a.shape) != tuple(b.shape):
            figures[key] = {"comparable": False, "source_shape": list(a.shape), "target_shape": list(b.shape)}
            continue
        if a.is_floating_point() or b.is_floating_point():
            a, b = a.float(), b.float()
            scale = a.abs().mean().item() or 1.0
            rel = (a - b).abs().mean().item() / scale
            figures[key] = {"comparable": True, "relative_mean_difference": round(rel, 5)}
            if rel > RELATIVE_TOLERANCE:
                problems.append(f"{key} differ from the source processor's by {rel:.1%} (mean absolute difference "
                                f"relative to the source's mean magnitude; at most {RELATIVE_TOLERANCE:.0%})")
        else:
            same = torch.equal(a, b)
            figures[key] = {"comparable": True, "equal": same}
            if not same:
                problems.append(f"{key} {b.flatten().tolist()[:6]} differ from the source processor's "
                                f"{a.flatten().tolist()[:6]}")
    return problems, figures


def _source_media(proc, render, sample, images):
    """The source processor's outputs for the sample's conversation with ``images``."""
    from _processor import call_with_images

    text = render(proc, sample["messages"], False)
    return dict(call_with_images(proc, text, images, return_tensors="pt"))


MIN_SIDE = 28  # a side below this is enlarged by some mm_plugins on their own (an aspect change of theirs)


def aspect_size(size):
    """The probe's size for an image of ``size``: the same area, the aspect ratio doubled (wider, or taller where
    the height would drop below ``MIN_SIDE``); None where neither keeps both sides at ``MIN_SIDE`` or more. The same
    area keeps the probe under any pixel limit the sample itself is under."""
    w, h = size
    root = 2 ** 0.5
    for size_ in ((round(w * root), round(h / root)), (round(w / root), round(h * root))):
        if min(size_) >= MIN_SIDE:
            return size_
    return None


def aspect_probe(proc, sample, example, collate_fn, originals):
    """(problems, figures) for the gradient at each image's area with its aspect ratio doubled: the source processor
    keeps an image's aspect ratio in its grid, so an mm_plugin that resizes every image to one fixed size (or crops
    it) changes the grid here even where the sample's own size and a smooth image hide it. Only integer tensors (the
    grid) decide: the example's ids were mapped for the sample's size, so the per-token keys are not comparable. A
    collator that cannot take the probe records why, and decides nothing."""
    import tempfile

    from PIL import Image

    from _data_parity import render_messages

    sizes = [aspect_size(img.size) for img in originals]
    if not originals or None in sizes:
        return [], {"skipped": "an image too small to change its aspect ratio above the minimum side"}
    with tempfile.TemporaryDirectory() as tmp:
        probes = []
        for k, size in enumerate(sizes):
            path = os.path.join(tmp, f"aspect_probe_{k}.png")
            gradient_image(size).save(path)
            probes.append(path)
        try:
            batch = dict(collate_fn([{**example, "images": probes}]))
        except Exception as exc:  # probe boundary: the collator refusing an image of another size is not a finding
            return [], {"error": f"{type(exc).__name__}: {exc}"[:300]}
        source = _source_media(proc, render_messages, sample, [Image.open(p).convert("RGB") for p in probes])
    import torch

    ints = {k: v for k, v in source.items() if isinstance(v, torch.Tensor) and not v.is_floating_point()}
    return compare_tensors(ints, {k: v for k, v in batch.items() if k in ints})


def bounds_problems(originals, bounds, source_out, batch, index):
    """The data path's pixel bounds (``image_max_pixels`` / ``image_min_pixels``, which the framework's mm_plugin
    applies before the processor) against the sample's images at their real size: where a bound resizes one, the
    batch's media tensors must still be the source processor's on the original within fp rounding (a bound as loose
    as the processor's own changes nothing it keeps), else the key is named with the numbers."""
    moved = []
    for k, img in enumerate(originals):
        area = img.width * img.height
        high, low = bounds.get("image_max_pixels"), bounds.get("image_min_pixels")
        if isinstance(high, int) and area > high:
            moved.append(f"image_max_pixels {high} shrinks image {k} ({img.width}x{img.height} = {area} pixels)")
        elif isinstance(low, int) and area < low:
            moved.append(f"image_min_pixels {low} enlarges image {k} ({img.width}x{img.height} = {area} pixels)")
    if not moved:
        return []
    import torch

    differs = []
    for key in sorted(set(source_out) & set(batch)):
        a, b = source_out[key], batch[key]
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or not a.is_floating_point():
            continue
        if tuple(a.shape) != tuple(b.shape):
            differs.append(f"{key} shape {list(b.shape)} vs the source processor's {list(a.shape)}")
            continue
        rel = (a.float() - b.float()).abs().mean().item() / (a.float().abs().mean().item() or 1.0)
        if rel > RESIZED_TOLERANCE:
            differs.append(f"{key} differ by {rel:.3g} (relative mean; fp tolerance {RESIZED_TOLERANCE:g})")
    if not differs:
        return []
    return [f"sample {index}: data.dataset_param.preprocess_parameters {'; '.join(moved)} before the processor, "
            f"which takes it at its real size: {'; '.join(differs)} (set the bounds from the source processor's own "
            "resolution / pixel limits)"]


def media_input_parity(source, data_path, examples, collate_fn, trust_remote_code=False, bounds=None):
    """The collated batch's media tensors against the source processor's, on the real samples' images and on a
    colour probe image in their place; None when no example has an image path the source processor can take.
    ``bounds``: the data path's pixel bounds (``bounds_problems``)."""
    import json
    import tempfile

    from PIL import Image

    from _data_parity import render_messages
    from _processor import load_processor

    proc = load_processor(source, trust_remote_code)[0]
    if getattr(proc, "image_processor", None) is None:
        return None  # the source processor makes no pixel values to compare with
    with open(data_path, encoding="utf-8") as fh:
        raw = json.load(fh)
    root = os.path.dirname(os.path.abspath(data_path))
    for i, example in enumerate(examples):
        paths = [p for p in example.get("images") or [] if isinstance(p, str)]
        sample = raw[i] if i < len(raw) and isinstance(raw, list) else None
        if not paths or not isinstance(sample, dict) or not isinstance(sample.get("messages"), list):
            continue
        originals = [Image.open(p if os.path.isabs(p) else os.path.join(root, p)).convert("RGB") for p in paths]
        problems, figures = [], {}
        batch = dict(collate_fn([dict(example)]))  # a copy: the real collator pops the media of what it is given
        source_out = _source_media(proc, render_messages, sample, originals)
        found, figures["sample"] = compare_tensors(source_out, batch)
        problems += [f"sample {i}'s images: {p}" for p in found]
        problems += bounds_problems(originals, bounds or {}, source_out, batch, i)
        with tempfile.TemporaryDirectory() as tmp:
            probes = []
            for k, img in enumerate(originals):
                path = os.path.join(tmp, f"colour_probe_{k}.png")
                gradient_image(img.size).save(path)
                probes.append(path)
            batch = dict(collate_fn([{**example, "images": probes}]))
            found, figures["colour_probe"] = compare_tensors(
                _source_media(proc, render_messages, sample, [Image.open(p).convert("RGB") for p in probes]), batch)
        plugin = find_attribute(collate_fn, "mm_plugin")
        name = f"the mm_plugin {defined_at(plugin)}" if plugin is not None else "the mm_plugin"
        problems += [f"a colour probe image in sample {i}'s place: {p} ({name}: its image loading / "
                     "conversion differs from the source processor's RGB images)" for p in found]
        found, figures["aspect_probe"] = aspect_probe(proc, sample, example, collate_fn, originals)
        problems += [f"a probe image of sample {i}'s area at twice its aspect ratio in its place: {p} ({name}: it "
                     "resizes or crops the image to another shape than the source processor keeps)" for p in found]
        return {"sample": i, "figures": figures, "problems": problems}
    return None
