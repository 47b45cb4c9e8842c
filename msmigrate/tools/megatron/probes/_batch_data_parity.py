"""Data parity of the Megatron route on the batch the model trains on (used by ``megatron_real_step``; runs in the
target runtime, imports nothing from msmigrate's package, only the sibling probe modules of ``tools/probes``).

G2's template parity compares the TEXT the data JSON's template writes around the answers; the token ids after the
framework's media expansion and its label mask are made by the real dataset, and G4's forward parity feeds the same
``get_batch`` batch to both models, so neither sees a wrong expansion or mask. Here the batch ``get_batch`` returned
(row 0: the CPU step's micro batch is 1) is compared with the source's OWN processing of the record it came from:
the conversation rendered with the source's chat template, run through the source's processor with the record's
images. The comparison is the FSDP2 route's (``_data_parity.check_sample``: prompt ids per assistant turn, the label
convention read from the labels, every trained position inside an assistant turn as the source renders it and its
label the source's token there, the answer's text covered, the media-token count, how the sequence ends), plus the
whole row id for id: the first position where get_batch's ids leave the source's fails, naming both tokens, unless
the rest decodes to the same text (the dataset tokenizes each template slot on its own, so an answer's first word may
be cut differently at the slot boundary: recorded as ``same_text_retokenized_from``).

Padding: the positions ``attention_mask`` marks as padding are taken off the row before comparing (left or right);
a batch without an attention_mask is compared whole. Not covered: packed rows (several records in one row), rows
past the first, records past the data file's first ``MAX_RECORDS``; the record is the first whose source ids equal the
row, else the one sharing the longest prefix + suffix with it (the dataset's sampler order is not read), named in the
result with ``records_scanned``.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "probes"))
from _data_parity import IGNORE, check_sample, declared_media_id, source_ids  # noqa: E402

MAX_RECORDS = 256  # records scanned for the one the row came from (the CPU step's data files are small)


def unpadded_row(batch, row=0):
    """(ids, labels, padding) of one batch row with the positions its attention_mask marks as padding taken off;
    None when the batch carries no 2-D input_ids and labels."""
    ids, labels = batch.get("input_ids"), batch.get("labels")
    if getattr(ids, "dim", lambda: 0)() != 2 or getattr(labels, "dim", lambda: 0)() != 2 or \
            tuple(ids.shape) != tuple(labels.shape):
        return None
    ids, labels = ids[row].tolist(), labels[row].tolist()
    mask = batch.get("attention_mask")
    if getattr(mask, "dim", lambda: 0)() == 2 and tuple(mask.shape) == tuple(batch["input_ids"].shape):
        keep = [bool(v) for v in mask[row].tolist()]
        return [t for t, k in zip(ids, keep) if k], [t for t, k in zip(labels, keep) if k], keep.count(False)
    return ids, labels, 0


def data_records(target, data_json, limit=MAX_RECORDS):
    """The data JSON's records as {messages (role/content, placeholders kept), images (paths)}, read through its
    ``attr`` tags and ``dataset_dir`` as the framework's dataset reads them."""
    doc = json.loads(open(os.path.join(target, data_json), encoding="utf-8").read())
    ds = doc.get("dataset_param") or {}
    basic, attr = ds.get("basic_parameters") or {}, ds.get("attr") or {}
    data = basic.get("dataset") or ""
    data = data if os.path.isabs(data) else os.path.join(target, data)
    base = basic.get("dataset_dir")
    base = (base if os.path.isabs(base) else os.path.join(target, base)) if base else os.path.dirname(data)
    roles = {attr.get("user_tag") or "user": "user", attr.get("assistant_tag") or "assistant": "assistant",
             attr.get("system_tag") or "system": "system"}
    out = []
    for record in json.loads(open(data, encoding="utf-8").read())[:limit]:
        messages = [{"role": roles[m.get(attr.get("role_tag") or "role")], "content": m.get(
            attr.get("content_tag") or "content")} for m in record.get(attr.get("messages") or "messages") or []
            if m.get(attr.get("role_tag") or "role") in roles]
        images = record.get(attr.get("images") or "images") or []
        images = [images] if isinstance(images, str) else images
        out.append({"messages": messages, "images": [p if os.path.isabs(p) else os.path.join(base, p)
                                                     for p in images]})
    return out


def _common(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    m = 0
    while m < min(len(a), len(b)) - n and a[len(a) - 1 - m] == b[len(b) - 1 - m]:
        m += 1
    return n + m


def compare_row(proc, sample, images, ids, labels, media_id):
    """check_sample on one unpadded row, plus the row id for id against the source's full rendering."""
    tok = getattr(proc, "tokenizer", proc)
    result = check_sample(proc, sample, images, {"input_ids": ids, "labels": labels}, media_id)
    problems = list(result["problems"])
    where, retokenized = result["first_divergence"], None
    src = source_ids(proc, sample["messages"], images, False) if where is not None else []

    def text(seq):
        return tok.decode(seq[where:], skip_special_tokens=False, clean_up_tokenization_spaces=False)

    if where is not None and where >= len(src):
        pass  # ids past the source's end: check_sample's ending check decides (one end token where it may follow)
    elif where is not None and text(ids) == text(src):
        # the same text from here on, cut into tokens differently (the dataset tokenizes each template slot on
        # its own: ``ASSISTANT:`` then `` The``): no id of other content, and its labels were checked above
        retokenized = where
    elif where is not None:
        def name(seq):
            return (f"{seq[where]} {tok.convert_ids_to_tokens(seq[where])!r}" if where < len(seq)
                    else "nothing (the sequence ended)")
        problems.insert(0, f"get_batch's input_ids leave the source processor's at position {where} of "
                           f"{len(ids)}: get_batch has {name(ids)}, the source has {name(src)}")
    if media_id is None:
        problems.append("the source's config declares no media token id: the media expansion was not compared")
    keep = ("tokens", "trained", "media_tokens", "source_media_tokens", "media_trained", "label_convention",
            "turns", "prompt_tokens", "full_match", "first_divergence", "decoded")
    return {**{k: result[k] for k in keep}, "media_token_id": media_id, "same_text_retokenized_from": retokenized,
            "problems": problems,
            "passed": not problems}


def batch_data_parity(batch, source, target, data_json, trust_remote_code=False):
    """The get_batch row against the source's own processing of the record it came from."""
    from PIL import Image

    from _processor import load_processor

    row = unpadded_row(batch)
    if row is None:
        return {"passed": False, "error": "get_batch's batch has no 2-D input_ids + labels of one shape: nothing "
                                          "to compare with the source's processing"}
    ids, labels, padding = row
    proc = load_processor(source, trust_remote_code)[0]
    records = data_records(target, data_json)
    if not records:
        return {"passed": False, "error": f"{data_json} names no records"}
    scored = []
    for k, rec in enumerate(records):
        images = [Image.open(p).convert("RGB") for p in rec["images"]]
        src = source_ids(proc, rec["messages"], images, False)
        scored.append((_common(ids, src), -k, images))
        if src == ids:
            break  # the record, id for id
    _, neg_k, images = max(scored)
    res = compare_row(proc, records[-neg_k], images, ids, labels, declared_media_id(source))
    return {**res, "record": -neg_k, "records_scanned": len(scored), "padding_removed": padding,
            "oracle": "the source's chat template + processor on the record's messages and images"}
