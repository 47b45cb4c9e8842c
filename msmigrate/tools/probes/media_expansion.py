"""Probe (data phase): how the source's OWN processor turns one image into tokens, measured on real samples.

    python media_expansion.py --model <hf folder> --data <train.json> [--samples 2] [--trust-remote-code]

Runs in the target runtime (transformers 4.x or 5.x) and imports nothing from msmigrate. Nothing here knows a model
family: every fact is read off the processor by calling it.

- ``placeholder``: what the source chat template renders for one image item (render a user turn with and without
  an image and cut the difference); else the processor's ``image_token``.
- per probed image (the samples' images plus two stretched copies of the first, so a size-dependent count shows):
  the processor is called on ``placeholder`` and on ``placeholder * 2`` with that image once/twice; the ids the
  second call has more are one image's expansion, and where they sit tells what the processor adds around it
  (``pre``/``post``: bos, a trailing newline …). The expansion is decoded and re-encoded (``roundtrip``).
- ``after_media_once``: ids the processor puts once between the media and the text after it, not per image
  (PaliGemma's ``<bos>`` after the last image run), and after which image (``first`` / ``last``).
- ``separator_after_media``: text the processor writes between the media and a word right after it, only where
  the text has no separator (Idefics2's space after its closing boundary token).
- ``kind``: ``fixed`` when every probed image expands identically, else ``per_image``; ``media_token`` the most
  repeated id of the expansion (cross-checked with the config's image token id); prefix / suffix / break tokens.
- ``num_multimodal_tokens``: the processor's own ``_get_num_multimodal_tokens`` where it has one (a cross-check).
- output keys: the processor's keys with and without an image, the image processor's own keys,
  ``model_input_names``; ``token_type_ids``: what the processor marks with it (media tokens, or the suffix).
- ``sample_lengths``: each sample with an image (up to ``SAMPLE_LIMIT``) rendered by the source's chat template and
  processor in full, untruncated: its length and media tokens (how long ``cutoff_len`` must be to cut no media).
"""
import argparse
import collections
import inspect
import json
import os
import sys

from _processor import call_with_images, load_processor

RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "
SAMPLE_LIMIT = 64
SENTINEL = "QQPROBEQQ"
TEXT_KEYS = ("input_ids", "attention_mask")


def emit(payload):
    print(RESULT_MARKER + json.dumps(payload, default=str), flush=True)


def tokenizer_of(proc):
    return getattr(proc, "tokenizer", proc)


def rendered_placeholder(proc):
    """The text the source chat template renders for one image item, or (None, why)."""
    tok = tokenizer_of(proc)
    render = getattr(proc, "apply_chat_template", None) if getattr(proc, "chat_template", None) else None
    if render is None and getattr(tok, "chat_template", None):
        render = tok.apply_chat_template
    if render is None:
        return None, "no chat template"
    turns = []
    for content in ([{"type": "image"}, {"type": "text", "text": SENTINEL}], [{"type": "text", "text": SENTINEL}]):
        try:
            turns.append(render([{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True))
        except Exception as exc:  # probe boundary: a template that only takes strings
            return None, f"the chat template does not render structured content: {type(exc).__name__}: {exc}"
    with_img, without = (t[: t.index(SENTINEL)] if SENTINEL in t else None for t in turns)
    if with_img is None or without is None:
        return None, "the chat template drops the text"
    common = os.path.commonprefix([with_img, without])
    inserted = with_img[len(common):]
    return (inserted or None), ("chat template" if inserted else "the chat template renders no image placeholder")


def load_images(data_path, samples):
    from PIL import Image

    with open(data_path, encoding="utf-8") as fh:
        raw = json.load(fh)
    root = os.path.dirname(os.path.abspath(data_path))
    out = []
    for sample in raw:
        for rel in sample.get("images") or []:
            path = rel if os.path.isabs(rel) else os.path.join(root, rel)
            out.append((rel, Image.open(path).convert("RGB")))
            if len(out) >= samples:
                return out
    return out


def sample_lengths(proc, data_path, media_id, limit=SAMPLE_LIMIT):
    """``[{sample, length, media}]``: the full, untruncated ids the source makes of each sample with an image and
    role/content turns (what the framework's dataset then cuts to ``cutoff_len``); a sample the source's template
    cannot render is listed with its ``error`` instead."""
    from PIL import Image

    from _data_parity import source_ids

    with open(data_path, encoding="utf-8") as fh:
        raw = json.load(fh)
    root = os.path.dirname(os.path.abspath(data_path))
    out = []
    for i, sample in enumerate(raw[:limit]):
        messages = sample.get("messages")
        if not sample.get("images") or not messages:
            continue
        paths = [p if os.path.isabs(p) else os.path.join(root, p) for p in sample["images"]]
        try:
            ids = source_ids(proc, messages, [Image.open(p).convert("RGB") for p in paths], False)
        except Exception as exc:  # batch item boundary: one sample's failure is that sample's result
            out.append({"sample": i, "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        out.append({"sample": i, "length": len(ids), "media": ids.count(media_id)})
    return out


def ids_of(proc, text, images):
    out = call_with_images(proc, text, images)
    ids = out["input_ids"]
    ids = ids.tolist() if hasattr(ids, "tolist") else ids
    return list(ids[0]), out


def one_expansion(proc, placeholder, image):
    """-> (expansion ids, pre, post): ids of placeholder+image, and how many ids the processor adds around it."""
    one, out = ids_of(proc, placeholder, [image])
    two, _ = ids_of(proc, placeholder + placeholder, [image, image])
    size = len(two) - len(one)
    if size <= 0:
        raise ValueError(f"a second image added {size} ids" + ignores_the_text(proc, placeholder, image))
    for pre in range(0, len(one) - size + 1):
        exp = one[pre: pre + size]
        if one[:pre] + exp + exp + one[pre + size:] == two:
            post = len(one) - pre - size
            if post and _closes_the_media(proc, placeholder, image, exp, one[pre + size:]):
                return one[pre:], pre, 0, out
            return exp, pre, post, out
    raise ValueError("the two-image expansion is not the one-image expansion repeated"
                     + placed_without_placeholder(proc, image))


def placed_without_placeholder(proc, image):
    """Why a placeholder measurement can fail: a processor that writes media ids for an image whose text holds no
    placeholder at all places its images itself (by its call form, before or after the text: Idefics' image-text
    call), so a placeholder in the text marks nothing. '' when it does not, or when that cannot be asked."""
    try:
        with_image, _ = ids_of(proc, SENTINEL, [image])
        text = tokenizer_of(proc)([SENTINEL])["input_ids"][0]
    except Exception:  # probe boundary: only a clue to the failure already found
        return ""
    extra = len(with_image) - len(list(text))
    if extra <= 0:
        return ""
    return (f" (the processor writes {extra} more ids for one image given a text with no placeholder: it places "
            "its images itself, not where the text's placeholder is, so no per-image expansion of a placeholder "
            "exists to measure)")


def ignores_the_text(proc, placeholder, image):
    """Why a second image can add no ids: a processor whose ids do not change with the text it is given writes a
    prompt of its own (ShieldGemma 2's policy prompts, one row per image), so the samples' text never reaches its
    batch. '' when the text changes the ids, or when that cannot be asked."""
    try:
        short, _ = ids_of(proc, placeholder + SENTINEL, [image])
        longer, _ = ids_of(proc, placeholder + SENTINEL + " " + SENTINEL[::-1] + " " + SENTINEL, [image])
    except Exception:  # probe boundary: only a clue to the failure already found
        return ""
    if short != longer:
        return ""
    return (" (the processor's ids do not change with the text it is given: it writes a prompt of its own, so the "
            "samples' text never reaches its batch and no faithful batch can be made from them)")


def _closes_the_media(proc, placeholder, image, exp, tail) -> bool:
    """Whether ``tail`` (ids after the one-vs-two-image repeat) closes each image: images next to each other share
    one boundary (``<fake><image>*n<fake><image>*n<fake>``), so the closing one is left out of the repeat, yet
    with text after each image it follows every expansion (expansion + tail twice in ``P + S + P + S``, whatever
    the processor then writes before the text: Idefics2 adds a space there). An eos after any text, or ids
    written once after the media (``after_media_once``'s business), do not."""
    ids, _ = ids_of(proc, placeholder + SENTINEL + placeholder + SENTINEL, [image, image])
    needle = list(exp) + list(tail)
    found, at = 0, _find(ids, needle)
    while at >= 0:
        found, at = found + 1, _find(ids, needle, at + 1)
    return found == 2


def _find(ids, needle, start=0):
    for i in range(start, len(ids) - len(needle) + 1):
        if ids[i: i + len(needle)] == needle:
            return i
    return -1


def _between_media_and_text(proc, placeholder, image, exp, pre):
    """-> (ids between the expansion and the text in ``placeholder + S``, their text, the text's ids) or
    (None, why, None)."""
    tok = tokenizer_of(proc)
    text_ids = tok.encode(SENTINEL, add_special_tokens=False)
    one, _ = ids_of(proc, placeholder + SENTINEL, [image])
    at = _find(one, text_ids, pre + len(exp))
    if one[pre: pre + len(exp)] != exp or at < 0:
        return None, "the expansion is not followed by the text in placeholder + text", None
    mid = one[pre + len(exp): at]
    if not mid:
        return None, "nothing between the expansion and the text", None
    return mid, tok.decode(mid, skip_special_tokens=False, clean_up_tokenization_spaces=False), text_ids


def after_media_once(proc, placeholder, image, exp, pre):
    """Ids the processor writes ONCE after the media, not per image (PaliGemma: ``<bos>`` after the last image
    run, before the prompt): -> ({"ids", "text", "where": "last" | "first"} or None, why).

    The one-vs-two-image difference (``one_expansion``) already holds whatever is added per image, so ids between
    an expansion and the text after it in ``placeholder + S`` are of this kind. ``placeholder + S + placeholder + S``
    tells after which image they go."""
    mid, mid_text, text_ids = _between_media_and_text(proc, placeholder, image, exp, pre)
    if mid is None:
        return None, mid_text
    # written whatever the text holds (PaliGemma's <bos> after the images: given one already, it writes a second),
    # or only where the text lacks it (a processor that adds a missing bos): the latter is no fact about the media,
    # since the rendered conversation holds that token itself
    given, _ = ids_of(proc, placeholder + mid_text + SENTINEL, [image])
    at_given = _find(given, text_ids, pre + len(exp))
    if given[pre: pre + len(exp)] == exp and given[pre + len(exp): at_given] == mid:
        return None, (f"ids {mid} follow the expansion only where the text lacks them (the text holding them "
                      "gets no second copy): the processor adds them when missing, not once after the media")
    two, _ = ids_of(proc, placeholder + SENTINEL + placeholder + SENTINEL, [image, image])
    first = pre + len(exp)
    second_text = _find(two, text_ids, first)
    second_exp = second_text + len(text_ids)
    where = None
    if two[first: first + len(mid)] == mid and _find(two, text_ids, first + len(mid)) == first + len(mid):
        where = "first"
    if two[second_exp: second_exp + len(exp)] == exp and two[second_exp + len(exp): second_exp + len(exp) + len(
            mid)] == mid and second_text == first:
        where = "last"
    if where is None:
        return None, f"ids {mid} after the expansion, but neither once after the first nor after the last image"
    return {"ids": mid, "text": mid_text, "where": where}, "placeholder + text, twice"


def separator_after_media(proc, placeholder, image, exp, pre):
    """Text the processor writes between the media and a word that follows it directly, only where the text has no
    separator there itself (Idefics2's processor turns ``<fake_token_around_image>Describe`` into
    ``<fake_token_around_image> Describe``): -> ({"ids", "text"} or None, why). The plugin expands each image on its
    own, so a rewrite of the text next to the media is lost unless it is measured.

    Three calls: ``placeholder + S`` has ids between the expansion and the text; ``placeholder + those + S`` gets no
    second copy (written only where missing); ``S + placeholder + S`` has them right after the expansion in the
    middle of the text too (a processor that puts the media first and adds a missing bos to the text does not)."""
    mid, mid_text, text_ids = _between_media_and_text(proc, placeholder, image, exp, pre)
    if mid is None:
        return None, mid_text
    given, _ = ids_of(proc, placeholder + mid_text + SENTINEL, [image])
    if _find(given, list(exp) + list(mid) + list(text_ids)) < 0:
        return None, f"ids {mid} after the expansion are written whatever the text holds"
    middle, _ = ids_of(proc, SENTINEL + placeholder + SENTINEL, [image])
    if _find(middle, list(text_ids) + list(exp) + list(mid) + list(text_ids)) < 0:
        return None, f"ids {mid} do not separate the media from the text after it in text + placeholder + text"
    return {"ids": mid, "text": mid_text}, "placeholder + text, with and without the separator, and mid-text"


def structure(exp, media_id, tok):
    """Prefix before the first media id, suffix after the last, and the ids that break runs of media ids."""
    where = [i for i, t in enumerate(exp) if t == media_id]
    if not where:
        return {}
    inner = [t for t in exp[where[0]: where[-1] + 1] if t != media_id]
    def conv(ids):  # each id as text (a byte-level "Ċ" reads as "\n")
        return [tok.decode([i], skip_special_tokens=False, clean_up_tokenization_spaces=False) for i in ids]

    return {"prefix": conv(exp[: where[0]]), "suffix": conv(exp[where[-1] + 1:]),
            "break_tokens": sorted(set(conv(sorted(set(inner))))), "runs": 1 + sum(
                1 for a, b in zip(exp[where[0]: where[-1]], exp[where[0] + 1: where[-1] + 1]) if a == media_id != b)}


def declared_media_id(folder):
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as fh:
        cfg = json.load(fh)
    for key in ("image_token_id", "image_token_index", "image_token"):
        if isinstance(cfg.get(key), int):
            return cfg[key], f"config.json:{key}"
    return None, None


def num_multimodal_tokens(proc, image):
    fn = getattr(proc, "_get_num_multimodal_tokens", None)
    if not callable(fn):
        return None
    try:
        data = fn(image_sizes=[(image.height, image.width)])
        return (getattr(data, "num_image_tokens", None) or (data.get("num_image_tokens") if isinstance(data, dict)
                                                            else None) or [None])[0]
    except Exception:  # probe boundary: a cross-check only
        return None


def token_type_rule(proc, placeholder, image, media_id):
    """What ``token_type_ids`` marks: 'media' (1 exactly on media tokens), 'suffix' (1 on a suffix the processor
    takes for training), 'zeros', or None when the processor does not return it."""
    ids, out = ids_of(proc, placeholder + SENTINEL, [image])
    tt = out.get("token_type_ids")
    if tt is not None:
        tt = list((tt.tolist() if hasattr(tt, "tolist") else tt)[0])
        if any(tt):
            return "media" if all((t == 1) == (i == media_id) for t, i in zip(tt, ids)) else "other"
    # a prefix-LM processor may mark (or only return) token_type_ids once it is given the suffix it trains on
    params = inspect.signature(proc.__call__).parameters
    if "suffix" in params or "kwargs" in params:  # transformers 4.x takes it through **kwargs
        try:
            with_suffix = proc(text=[placeholder + SENTINEL], images=[image], suffix=["answer"]).get("token_type_ids")
        except Exception:  # probe boundary: a processor without a suffix argument
            with_suffix = None
        if with_suffix is not None:
            tt2 = list((with_suffix.tolist() if hasattr(with_suffix, "tolist") else with_suffix)[0])
            if any(tt2) and tt2 == sorted(tt2):
                return "suffix"
    return None if tt is None else "zeros"


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--trust-remote-code", action="store_true")
    args = ap.parse_args(argv)
    try:
        proc, loaded_via, processor_class, processor_kwargs = load_processor(args.model, args.trust_remote_code)
        tok = tokenizer_of(proc)
        if getattr(proc, "image_processor", None) is None:
            emit({"error": f"{type(proc).__name__} has no image processor", "loaded_via": loaded_via})
            return 1
        placeholder, placeholder_source = rendered_placeholder(proc)
        if placeholder is None and isinstance(getattr(proc, "image_token", None), str):
            placeholder, placeholder_source = proc.image_token, f"processor.image_token ({placeholder_source})"
        if placeholder is None:
            emit({"error": f"no image placeholder: {placeholder_source}", "loaded_via": loaded_via})
            return 1
        images = load_images(args.data, args.samples)
        if not images:
            emit({"error": f"no sample in {args.data} has an image", "loaded_via": loaded_via})
            return 1
        first = images[0][1]
        probes = images + [("stretched wide", first.resize((first.width * 3, first.height))),
                           ("stretched tall", first.resize((first.width, first.height * 3)))]
        per_image, pre_post, outputs = [], set(), None
        for label, image in probes:
            exp, pre, post, out = one_expansion(proc, placeholder, image)
            outputs = outputs or out
            pre_post.add((pre, post))
            text = tok.decode(exp, skip_special_tokens=False, clean_up_tokenization_spaces=False)
            per_image.append({"image": label, "size": [image.width, image.height], "ids": exp, "text": text,
                              "roundtrip": tok.encode(text, add_special_tokens=False) == exp,
                              "num_multimodal_tokens": num_multimodal_tokens(proc, image)})
        once, once_why = after_media_once(proc, placeholder, first, per_image[0]["ids"], sorted(pre_post)[0][0])
        separator, separator_why = (None, "ids written once after the media") if once else separator_after_media(
            proc, placeholder, first, per_image[0]["ids"], sorted(pre_post)[0][0])
        declared, declared_from = declared_media_id(args.model)
        counts = collections.Counter(t for p in per_image for t in p["ids"])
        media_id = declared if declared in counts else counts.most_common(1)[0][0]
        for p in per_image:
            p["count"] = p["ids"].count(media_id)
            p.update(structure(p["ids"], media_id, tok))
        try:
            text_only = sorted(proc(text=[SENTINEL]).keys())
        except Exception:  # probe boundary: some processors require images (PaliGemma)
            text_only = sorted(tok([SENTINEL]).keys())
        ip_keys = sorted(proc.image_processor([first], return_tensors="pt").keys())
        result = {
            "processor_class": processor_class, "loaded_via": loaded_via,
            "placeholder": placeholder, "placeholder_source": placeholder_source,
            "media_token": tok.convert_ids_to_tokens(media_id), "media_token_id": media_id,
            "media_token_source": declared_from if declared == media_id else "most repeated id of the expansion",
            "kind": "fixed" if len({tuple(p["ids"]) for p in per_image}) == 1 else "per_image",
            "pre_post": sorted(pre_post), "per_image": per_image,
            "roundtrip": all(p["roundtrip"] for p in per_image),
            "keys_with_image": sorted(outputs.keys()), "keys_text_only": text_only, "image_processor_keys": ip_keys,
            "model_input_names": list(getattr(proc, "model_input_names", []) or []),
            "token_type_ids": token_type_rule(proc, placeholder, first, media_id),
            "processor_kwargs": processor_kwargs,
            "after_media_once": once, "after_media_once_why": once_why,
            "separator_after_media": separator, "separator_after_media_why": separator_why,
            "sample_lengths": sample_lengths(proc, args.data, media_id),
        }
    except Exception as exc:  # probe boundary: the failure is the result
        import traceback

        traceback.print_exc()
        emit({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    if len(pre_post) != 1:
        result["error"] = f"the processor adds a different number of ids around different images: {sorted(pre_post)}"
    elif not result["roundtrip"]:
        result["error"] = "the decoded expansion does not re-encode to the same ids"
    emit(result)
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
