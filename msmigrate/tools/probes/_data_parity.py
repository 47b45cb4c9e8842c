"""Data parity (gate G2), used by ``data_check`` (runs in the target runtime; imports nothing from msmigrate).

The source is the oracle: for each real sample, the conversation is rendered with the SOURCE's chat template and
tokenized by the source's own processor with the sample's images, and the TARGET's mapped example (input_ids, labels
from the registered dataset + template + mm_plugin) is compared with it:

- prompt parity: for every assistant turn, the target's ids before that turn equal the source's ids of the
  conversation up to it rendered with ``add_generation_prompt=True`` (system turn, role markers, image expansion —
  all of it, id for id);
- label mask: every trained position (label != -100) lies in an assistant turn (from where its prompt ends to where
  the source's rendering of that turn ends), is the input id there, is no media token, and each turn's trained
  tokens decode to text containing that turn's content;
- media tokens: the target's count of the media token equals the source's for the whole conversation.

Nothing here knows a model family: turns come from the sample, ids from the source processor, the media token id
from the plan's media expansion (the source processor's own measurement).
"""
import os

IGNORE = -100


def _structured(messages):
    """ShareGPT messages with ``<image>`` placeholders -> chat-template content items."""
    out = []
    for m in messages:
        parts = m["content"].split("<image>")
        content = [{"type": "text", "text": parts[0]}] if parts[0] else []
        for text in parts[1:]:
            content += [{"type": "image"}] + ([{"type": "text", "text": text}] if text else [])
        out.append({"role": m["role"], "content": content})
    return out


def source_ids(proc, messages, images, generation_prompt):
    """The source's ids for ``messages``: its chat template rendered, then its processor on text + the images the
    rendered turns refer to. A template that already writes the bos token is not given a second one (what the
    processor's own tokenizing apply_chat_template does)."""
    text = proc.apply_chat_template(_structured(messages), tokenize=False, add_generation_prompt=generation_prompt)
    n_images = sum(m["content"].count("<image>") for m in messages)
    tok = getattr(proc, "tokenizer", proc)
    bos = getattr(tok, "bos_token", None)
    kwargs = {"add_special_tokens": False} if bos and text.startswith(bos) else {}
    out = proc(text=[text], images=images[:n_images] or None, **kwargs)
    ids = out["input_ids"]
    ids = ids.tolist() if hasattr(ids, "tolist") else ids
    return list(ids[0])


def _first_mismatch(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _squash(text):
    return "".join(text.split())


def marked_sample(tok, ids, labels, media_id, limit=1200):
    """The decoded sample with trained spans in ⟦ ⟧ and runs of the media token collapsed to ``<tok>×N``."""
    out, i = [], 0
    while i < len(ids):
        j = i
        if ids[i] == media_id:
            while j < len(ids) and ids[j] == media_id:
                j += 1
            piece = f"{tok.convert_ids_to_tokens(media_id)}×{j - i}"
        else:
            trained = labels[i] != IGNORE
            while j < len(ids) and ids[j] != media_id and (labels[j] != IGNORE) == trained:
                j += 1
            text = tok.decode(ids[i:j], skip_special_tokens=False, clean_up_tokenization_spaces=False)
            piece = f"⟦{text}⟧" if trained else text
        out.append(piece)
        i = j
    text = "".join(out)
    return text if len(text) <= limit else text[:limit] + f"… (+{len(text) - limit} chars)"


def check_sample(proc, sample, images, example, media_id):
    tok = getattr(proc, "tokenizer", proc)
    ids, labels = list(example["input_ids"]), list(example["labels"])
    messages = sample["messages"]
    problems, regions = [], []
    for a, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        prompt = source_ids(proc, messages[:a], images, True)
        where = _first_mismatch(ids[:len(prompt)], prompt)
        if where is not None:
            ctx = slice(max(0, where - 3), where + 4)
            problems.append(f"turn {a}: prompt ids differ from the source's at position {where} of {len(prompt)} "
                            f"(target {tok.decode(ids[ctx], skip_special_tokens=False)!r} vs source "
                            f"{tok.decode(prompt[ctx], skip_special_tokens=False)!r})")
            break
        end = len(source_ids(proc, messages[:a + 1], images, False))
        regions.append((a, len(prompt), end))
    if regions:  # the last turn runs to the end (a template may close it with an eos the source render lacks)
        a, s, e = regions[-1]
        regions[-1] = (a, s, max(e, len(ids)))
    trained = [i for i, lab in enumerate(labels) if lab != IGNORE]
    inside = set()
    for a, s, e in regions:
        span = [i for i in trained if s <= i < e]
        inside.update(span)
        got = tok.decode([ids[i] for i in span], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if _squash(messages[a]["content"]) not in _squash(got):
            problems.append(f"turn {a}: the trained tokens ({len(span)}) do not cover the assistant's answer "
                            f"{messages[a]['content'][:60]!r} (trained: {got[:80]!r})")
    outside = [i for i in trained if i not in inside]
    if regions and outside:
        problems.append(f"{len(outside)} trained tokens outside the assistant turns (first at {outside[0]}: "
                        f"{tok.decode(ids[outside[0]:outside[0] + 6], skip_special_tokens=False)!r}): "
                        "prompt tokens are trained")
    if any(labels[i] != ids[i] for i in trained):
        problems.append("labels are not the input ids at the trained positions (shifted or rewritten)")
    media_trained = sum(1 for i in trained if ids[i] == media_id)
    if media_trained:
        problems.append(f"{media_trained} media tokens are trained")
    if not trained:
        problems.append("no trained token at all")
    src_full = source_ids(proc, messages, images, False)
    media_t, media_s = ids.count(media_id), src_full.count(media_id)
    if media_t != media_s:
        problems.append(f"{media_t} media tokens in the target's ids, the source processor makes {media_s}")
    return {
        "tokens": len(ids), "trained": len(trained), "masked": len(ids) - len(trained),
        "media_tokens": media_t, "source_media_tokens": media_s, "media_trained": media_trained,
        "turns": len(regions), "prompt_tokens": [s for _, s, _ in regions],
        "full_match": _first_mismatch(ids, src_full) is None, "problems": problems,
        "decoded": marked_sample(tok, ids, labels, media_id),
    }


def data_parity(source, data_path, examples, media_id, trust_remote_code=False):
    """Compare the mapped examples with the source's own processing of the same raw samples (by position)."""
    import json

    from PIL import Image

    from _processor import load_processor

    proc = load_processor(source, trust_remote_code)[0]
    with open(data_path, encoding="utf-8") as fh:
        raw = json.load(fh)
    root = os.path.dirname(os.path.abspath(data_path))
    samples, problems = [], []
    for i, example in enumerate(examples):
        if i >= len(raw):
            break
        sample = raw[i]
        paths = [p if os.path.isabs(p) else os.path.join(root, p) for p in sample.get("images") or []]
        mapped = [os.path.basename(p) for p in example.get("images") or [] if isinstance(p, str)]
        if mapped and [os.path.basename(p) for p in paths] != mapped:
            problems.append(f"sample {i}: the target's example has images {mapped}, the raw sample {paths}")
            continue
        images = [Image.open(p).convert("RGB") for p in paths]
        result = check_sample(proc, sample, images, example, media_id)
        samples.append(result)
        problems += [f"sample {i}: {p}" for p in result["problems"]]
    totals = {k: sum(s[k] for s in samples) for k in ("tokens", "trained", "masked", "media_tokens",
                                                      "source_media_tokens", "media_trained")}
    return {"samples_compared": len(samples), "media_token_id": media_id, **totals,
            "prompt_match": not any("prompt ids differ" in p for p in problems),
            "decoded_sample": samples[0]["decoded"] if samples else None,
            "per_sample": [{k: v for k, v in s.items() if k != "decoded"} for s in samples],
            "passed": bool(samples) and not problems, "problems": problems}
