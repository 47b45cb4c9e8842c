"""Media tokens cut by ``cutoff_len`` (runs in the target runtime; imports nothing from msmigrate).

The framework's dataset cuts every sequence to ``basic_parameters.cutoff_len``; a cut through an image's expansion
leaves fewer media tokens than the vision tower makes features, and the forward fails on the accelerator ("image
features and image tokens do not match") or, worse, trains on a broken sample. For each mapped sample (up to a
limit), the media tokens the target kept are counted against what the source's own processor makes of the same raw
sample, untruncated; a sample that kept fewer, and whose full sequence is longer than ``cutoff_len``, is reported
with its numbers."""
import json
import os

LIMIT = 256


def cutoff_findings(dataset, cutoff_len, source, data_path, media_id, trust_remote_code=False, limit=LIMIT):
    """``{"cutoff_len", "checked", "cut": [{sample, kept, full, length, full_length}]}``; ``cut`` empty when no
    sample lost media tokens to the cut."""
    from PIL import Image

    from _data_parity import source_ids
    from _processor import load_processor

    out = {"cutoff_len": cutoff_len, "checked": 0, "cut": []}
    if not cutoff_len or media_id is None:
        out["skipped"] = "no cutoff_len" if not cutoff_len else "no media token id"
        return out
    with open(data_path, encoding="utf-8") as fh:
        raw = json.load(fh)
    root = os.path.dirname(os.path.abspath(data_path))
    proc = None
    for i in range(min(len(dataset), len(raw), limit)):
        sample = raw[i]
        if not sample.get("images"):
            continue
        ids = list(dataset[i]["input_ids"])
        out["checked"] += 1
        if len(ids) < cutoff_len:  # not cut: the whole sequence fits
            continue
        if proc is None:
            proc = load_processor(source, trust_remote_code)[0]
        paths = [p if os.path.isabs(p) else os.path.join(root, p) for p in sample["images"]]
        images = [Image.open(p).convert("RGB") for p in paths]
        messages = sample.get("messages")
        if not messages:  # role/content turns only: what the source's chat template renders
            continue
        full = source_ids(proc, messages, images, False)
        kept, whole = ids.count(media_id), full.count(media_id)
        if kept < whole and len(full) > cutoff_len:
            out["cut"].append({"sample": i, "kept": kept, "full": whole, "length": len(ids),
                               "full_length": len(full)})
    return out
