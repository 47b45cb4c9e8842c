"""Data parity (gate G2), used by ``data_check`` (runs in the target runtime; imports nothing from msmigrate).

The source is the oracle: for each real sample, the conversation is rendered with the SOURCE's chat template and
tokenized by the source's own processor with the sample's images, and the TARGET's mapped example (input_ids, labels
from the registered dataset + template + mm_plugin) is compared with it:

- prompt parity: for every assistant turn, the target's ids before that turn equal the source's ids of the
  conversation up to it rendered with ``add_generation_prompt=True`` (system turn, role markers, image expansion —
  all of it, id for id);
- label convention: read from the target's own labels, not assumed: ``aligned`` (label i is the token at i, the
  loss shifts, so label 0 never trains — MindSpeed-MM's and transformers' convention; an efficient-eos template puts
  the turn-closing eos there) or ``shifted`` (label i is already the next token, i+1; Megatron-style). Every label is
  mapped to the sequence position whose token it trains, and the checks below run on those positions;
- label mask: every trained position lies in an assistant turn (from where its prompt ends to where the source's
  rendering of that turn ends), its label is the token the SOURCE has there (while the target's ids still equal the
  source's; past that, the token the target feeds), it is no media token, and each turn's trained tokens decode to
  text containing that turn's content;
- media tokens: the target's count of the media token equals the source's for the whole conversation.

A source whose processor does not expand media (no image processor) is compared around its placeholders: with a
one-token placeholder that the config declares as the media token, each media run counts as that token
(``collapse_media_runs``); otherwise (a multi-token placeholder, no declared id: InternVL-chat) the source's text
between placeholders must be the target's ids id for id and the target's span in each placeholder's place is its
media run, reported with its length and decoded form, the media token read from the spans (``placeholder_parity``).

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


END_PROBE = "QQTEXTENDQQ"


def _call(proc, text, images, kwargs):
    from _processor import call_with_images

    ids = call_with_images(proc, text, images, **kwargs)["input_ids"]
    return list((ids.tolist() if hasattr(ids, "tolist") else ids)[0])


def render(proc, messages, generation_prompt):
    """The source chat template rendered, from whatever carries it: the processor's own template through its
    ``apply_chat_template``, else the tokenizer's (processors that take no template of their own). A processor
    composed without its video processor (``_processor``: this runtime lacks torchvision) is rendered through its
    tokenizer with the processor's template: some processors' own ``apply_chat_template`` reads video settings off
    the missing part (SmolVLM's ``num_frames``)."""
    tok = getattr(proc, "tokenizer", proc)
    own = getattr(proc, "chat_template", None) if tok is not proc else None
    if tok is not proc and (not own or getattr(proc, "video_processor", "absent") is None):
        template = own or getattr(tok, "chat_template", None)
        if not template:
            raise ValueError(f"neither {type(proc).__name__} nor its tokenizer has a chat template")
        return tok.apply_chat_template(messages, chat_template=template, tokenize=False,
                                       add_generation_prompt=generation_prompt)
    return proc.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)


def render_messages(proc, messages, generation_prompt):
    """The conversation rendered in the content form the source template takes: structured content items first
    (what processors pass), else the ShareGPT strings with their placeholders (a published template that
    concatenates ``message['content']`` raises TypeError on a list)."""
    try:
        return render(proc, _structured(messages), generation_prompt)
    except Exception:  # probe boundary: the template is the source's code; the string form is the other one it takes
        return render(proc, messages, generation_prompt)


def source_ids(proc, messages, images, generation_prompt):
    """The source's ids for ``messages``: its chat template rendered, then its processor on text + the images the
    rendered turns refer to. A template that already writes the bos token is not given a second one (what the
    processor's own tokenizing apply_chat_template does).

    Ids the processor appends at the end of whatever text it is given (PaliGemma's ``\n`` that closes the prefix)
    are left off: they mark where the handed-over text ends, not a place in the conversation (a prompt render has
    them where the training sequence goes on with the answer). Measured, not assumed: the same text with a
    sentinel appended must keep them after the sentinel."""
    text = render_messages(proc, messages, generation_prompt)
    n_images = sum(m["content"].count("<image>") for m in messages)
    tok = getattr(proc, "tokenizer", proc)
    bos = getattr(tok, "bos_token", None)
    kwargs = {"add_special_tokens": False} if bos and text.startswith(bos) else {}
    ids = _call(proc, text, images[:n_images], kwargs)
    probe = _call(proc, text + END_PROBE, images[:n_images], kwargs)
    tail = 0
    while tail < min(len(ids), len(probe)) and ids[len(ids) - 1 - tail] == probe[len(probe) - 1 - tail]:
        tail += 1
    if tail and ids[: len(ids) - tail] == probe[: len(ids) - tail]:
        return ids[: len(ids) - tail]
    return ids


def closed_by_template(proc, messages, images, src_full, ids_of):
    """How many ids the source's template writes after the last answer's own text (an end-of-turn token, an eos, a
    newline): measured by rendering the same conversation with a sentinel appended to that answer and counting the
    ids both renders end with. 0: the template leaves the answer open (the next turn's header is what ends it).
    Nothing here knows which tokens are special: a template that writes special tokens INTO the answer (an empty
    ``<think></think>``) is read as what it renders."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if last is None:
        return 0
    probe = [dict(m) for m in messages]
    probe[last]["content"] = f"{probe[last]['content']} {END_PROBE}"
    other = ids_of(proc, probe, images, False)
    n = 0
    while n < min(len(src_full), len(other)) and src_full[len(src_full) - 1 - n] == other[len(other) - 1 - n]:
        n += 1
    return n


def _special_strings(tok):
    """The tokenizer's own special tokens, by text: those it declares, and added tokens it marks special."""
    out = set(getattr(tok, "all_special_tokens", None) or [])
    out |= {str(t) for t in (getattr(tok, "added_tokens_decoder", None) or {}).values() if getattr(t, "special", False)}
    return {t for t in out if t}


def _neutral(messages):
    """The conversation's frame: every turn's text replaced by one word, its ``<image>`` placeholders kept."""
    return [{**m, "content": "<image>".join("x" if part else "" for part in m["content"].split("<image>"))}
            for m in messages]


def template_tokens_in_text(proc, messages):
    """Problems: a turn's own text carries a special token of the source's tokenizer that the source's chat template
    writes itself (it is in the rendering of the conversation's frame, every turn's text one word), and the record's
    rendering holds it more often than the frame's — an end-of-turn token left on an exported answer is rendered
    twice and trained inside the answer. Measured on the source's own rendering: a token the template reads out of
    the text and renders once (a reasoning block it re-formats) is not more frequent, and a special token the
    template never writes (a grounding box marker in the text) is the data's own; the dataset's ``<image>``
    placeholder is the media marker, not text. Both the target and the source tokenize the same records, so id
    parity cannot see this."""
    tok = getattr(proc, "tokenizer", proc)
    specials = _special_strings(tok)
    carried = {t: [a for a, m in enumerate(messages) if t in m["content"].replace("<image>", "")] for t in specials}
    carried = {t: turns for t, turns in carried.items() if turns}
    if not carried:
        return []
    real, frame = render_messages(proc, messages, False), render_messages(proc, _neutral(messages), False)
    out = []
    for t, turns in sorted(carried.items()):
        if frame.count(t) and real.count(t) > frame.count(t):
            out.append(f"turn{'s' * (len(turns) > 1)} {', '.join(map(str, turns))} "
                       f"({', '.join(sorted({messages[a]['role'] for a in turns}))}): the record's own text carries "
                       f"{t!r}, a special token the source's chat template writes itself ({frame.count(t)} in the "
                       f"conversation's frame, {real.count(t)} rendered with this text): the turn holds it twice "
                       f"and the model is trained to emit it inside the text — strip it from the records")
    return out


def empty_answers(messages):
    """Problems: an assistant turn whose text in the record is empty (or blank) trains the model to end its turn at
    once — answers lost in an export. Both sides render the same records, so id parity agrees on it."""
    empty = [a for a, m in enumerate(messages)
             if m.get("role") == "assistant" and isinstance(m.get("content"), str) and not m["content"].strip()]
    if not empty:
        return []
    return [f"turn{'s' * (len(empty) > 1)} {', '.join(map(str, empty))} (assistant): the record's answer is empty, so "
            f"the sample trains only the turn's end (the model learns to answer nothing) — fill in or drop the "
            f"sample in the records"]


RECORD_SCAN_LIMIT = 20000  # records read for what only the records can be wrong about (their own text)
# answers it takes before "every answer ends with whitespace" says something of the export rather than of one answer
MIN_ANSWERS_JUDGED = 3


def record_text_problems(proc, raw):
    """(problems, records read): every record's own text (up to RECORD_SCAN_LIMIT) for what no id parity can see,
    since the target and the source tokenize the same records: an empty answer, a special token the template writes
    itself, answers that all end with whitespace. One line per kind of problem, with its count and the first samples
    that have it."""
    hits, read, answers, padded = {}, 0, 0, 0
    for i, sample in enumerate(raw[:RECORD_SCAN_LIMIT]):
        if not isinstance(sample, dict) or not isinstance(sample.get("messages"), list):
            continue
        read += 1
        messages = [m for m in sample["messages"] if isinstance(m, dict) and isinstance(m.get("content"), str)]
        for problem in empty_answers(messages) + template_tokens_in_text(proc, messages):
            kind = problem.split(": ", 1)[1] if ": " in problem else problem
            hits.setdefault(kind, []).append((i, problem))
        said = [m["content"] for m in messages if m.get("role") == "assistant" and m["content"].strip()]
        answers += len(said)
        padded += sum(1 for text in said if text != text.rstrip())
    out = []
    if answers >= MIN_ANSWERS_JUDGED and padded == answers:
        out.append(f"every answer of the records ({answers} in {read} sample(s)) ends with whitespace (a newline or "
                   f"space after its last word): an export's artifact, not an answer's content; each sample trains "
                   f"the model to emit it before the turn's end, which no answer of the source's own chat has — "
                   f"strip the answers' trailing whitespace in the records")
    for found in hits.values():
        first, problem = found[0]
        more = f" (and {len(found) - 1} more sample(s): {', '.join(str(i) for i, _ in found[1:6])}" \
               f"{' …' if len(found) > 6 else ''})" if len(found) > 1 else ""
        out.append(f"sample {first}: {problem}{more}")
    return out, read


def _end_ids(tok):
    """The ids the tokenizer declares as ending a sequence (its eos, one or several)."""
    eos = getattr(tok, "eos_token_id", None)
    return set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}


def _first_mismatch(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _squash(text):
    return "".join(text.split())


def label_convention(ids, labels):
    """How the target's labels line up with its input ids, read from the labels themselves: ``aligned`` when more
    trained labels equal the input id at their own position, ``shifted`` when more equal the id one position later
    (ties, e.g. no trained label, read as aligned). Returns (convention, {aligned: n, shifted: n}) — the counts are
    the evidence."""
    trained = [i for i, lab in enumerate(labels) if lab != IGNORE]
    agree = {"aligned": sum(1 for i in trained if labels[i] == ids[i]),
             "shifted": sum(1 for i in trained if i + 1 < len(ids) and labels[i] == ids[i + 1])}
    return ("shifted" if agree["shifted"] > agree["aligned"] else "aligned"), agree


def trained_targets(labels, convention):
    """({j: token}, unused): each label as the token it trains at sequence position j (predicted from ids[:j]).
    Aligned labels train where they stand, except label 0, which the loss's shift never reaches (``unused``); shifted
    labels train the next position, so the last one may train a token past the input (an eos the target feeds only
    as a label)."""
    if convention == "shifted":
        return {i + 1: lab for i, lab in enumerate(labels) if lab != IGNORE}, 0
    return ({j: lab for j, lab in enumerate(labels) if lab != IGNORE and j > 0},
            int(bool(labels) and labels[0] != IGNORE))


def marked_sample(tok, ids, targets, media_id, limit=1200):
    """The decoded sample with trained positions in ⟦ ⟧ (a trained token that is not the input id there shown as
    ``→token`` after the input it replaces) and runs of the media token collapsed to ``<tok>×N``."""
    def decode(seq):
        return tok.decode(seq, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def plain(j):
        return targets.get(j, ids[j]) == ids[j]

    pieces, i = [], 0  # (trained, text)
    while i < len(ids):
        j = i + 1
        if ids[i] == media_id:
            while j < len(ids) and ids[j] == media_id:
                j += 1
            pieces.append((False, f"{tok.convert_ids_to_tokens(media_id)}×{j - i}"))
        else:
            trained = i in targets
            while (plain(i) and j < len(ids) and ids[j] != media_id and (j in targets) == trained and plain(j)):
                j += 1
            pieces.append((trained, decode(ids[i:j]) + ("" if plain(i) else "→" + decode([targets[i]]))))
        i = j
    past = [targets[j] for j in sorted(targets) if j >= len(ids)]
    if past:
        pieces.append((True, "→" + decode(past)))
    out = []
    for trained, text in pieces:  # neighbouring trained pieces share one bracket
        if trained and out and out[-1][0]:
            out[-1] = (True, out[-1][1] + text)
        else:
            out.append((trained, text))
    text = "".join(f"⟦{t}⟧" if trained else t for trained, t in out)
    return text if len(text) <= limit else text[:limit] + f"… (+{len(text) - limit} chars)"


def check_sample(proc, sample, images, example, media_id, ids_of=None):
    """Problems and figures of one target example against the source's ids (``ids_of``: how the source's ids of a
    conversation are made; its processor's own by default)."""
    ids_of = ids_of or source_ids
    tok = getattr(proc, "tokenizer", proc)
    ids, labels = list(example["input_ids"]), list(example["labels"])
    convention, agree = label_convention(ids, labels)
    targets, unused = trained_targets(labels, convention)
    messages = sample["messages"]
    problems, regions = [], []
    for a, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        prompt = ids_of(proc, messages[:a], images, True)
        where = _first_mismatch(ids[:len(prompt)], prompt)
        if where is not None:
            ctx = slice(max(0, where - 3), where + 4)
            problems.append(f"turn {a}: prompt ids differ from the source's at position {where} of {len(prompt)} "
                            f"(target {tok.decode(ids[ctx], skip_special_tokens=False)!r} vs source "
                            f"{tok.decode(prompt[ctx], skip_special_tokens=False)!r})")
            break
        end = len(ids_of(proc, messages[:a + 1], images, False))
        regions.append((a, len(prompt), end))
    if regions:  # the last turn runs to the end (a template may close it with an eos the source render lacks)
        a, s, e = regions[-1]
        regions[-1] = (a, s, max(e, len(ids) + 1))
    trained = sorted(targets)
    inside = set()
    for a, s, e in regions:
        span = [j for j in trained if s <= j < e]
        inside.update(span)
        got = tok.decode([targets[j] for j in span], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if _squash(messages[a]["content"]) not in _squash(got):
            problems.append(f"turn {a}: the trained tokens ({len(span)}) do not cover the assistant's answer "
                            f"{messages[a]['content'][:60]!r} (trained: {got[:80]!r})")
    outside = [j for j in trained if j not in inside]
    if regions and outside:
        first = min(outside[0], len(ids) - 1)
        problems.append(f"{len(outside)} trained tokens outside the assistant turns (first at {outside[0]}: "
                        f"{tok.decode(ids[first:first + 6], skip_special_tokens=False)!r}): "
                        "prompt tokens are trained")
    src_full = ids_of(proc, messages, images, False)
    diverge = _first_mismatch(ids, src_full)
    wrong = []
    for j in trained:
        # while the target's ids equal the source's, the source's next token is the oracle; past that, the token
        # the target itself feeds there; past the input's end only a closing eos may be trained
        if j < len(src_full) and (diverge is None or j <= diverge):
            expected = src_full[j]
        else:
            expected = ids[j] if j < len(ids) else getattr(tok, "eos_token_id", None)
        if targets[j] != expected:
            wrong.append((j, expected))
    if wrong:
        j, expected = wrong[0]
        problems.append(f"{len(wrong)} labels ({convention} convention) are not the token the source has at the "
                        f"position they train (first at {j}: label {tok.decode([targets[j]], skip_special_tokens=False)!r}"
                        f" vs {tok.decode([expected], skip_special_tokens=False) if expected is not None else None!r})"
                        ": shifted or rewritten labels")
    media_trained = sum(1 for j in trained if targets[j] == media_id)
    if media_trained:
        problems.append(f"{media_trained} media tokens are trained")
    if not trained:
        problems.append("no trained token at all")
    media_t, media_s = ids.count(media_id), src_full.count(media_id)
    if media_t != media_s:
        problems.append(f"{media_t} media tokens in the target's ids, the source processor makes {media_s}")
    # how the sequence ends: as the source's, where the target may add one end token (the tokenizer's eos) only
    # when the source's template leaves its last answer open (writes nothing after the answer's own text, GLM-style:
    # measured by closed_by_template, not read from which tokens are special); an eos appended after an answer the
    # template closes itself doubles it. A token trained past the input's end (shifted labels: an eos fed
    # only as a label) is part of the sequence. Aligned by the source's last ids, so a difference earlier in the
    # answer (tokenization at a slot boundary: its labels are checked above) does not hide this.
    seq = ids + [targets[j] for j in sorted(targets) if j >= len(ids)]
    tail = src_full[-2:]
    extra = next((m for m in range(4) if len(seq) - m >= len(tail) and seq[len(seq) - m - len(tail): len(seq) - m]
                  == tail), None)
    if extra is None:
        problems.append(f"the target's sequence does not end as the source's does (target "
                        f"{tok.decode(seq[-4:], skip_special_tokens=False)!r} vs source "
                        f"{tok.decode(src_full[-4:], skip_special_tokens=False)!r})")
    elif extra:
        closer = closed_by_template(proc, messages, images, src_full, ids_of)
        why = (f"the source's template closes the answer itself with {closer} id(s): an appended end doubles it"
               if closer else f"the source leaves the answer open, where at most one end token "
                              f"({tok.convert_ids_to_tokens(sorted(_end_ids(tok)))}) may follow")
        if closer or extra > 1 or seq[-1] not in _end_ids(tok):
            problems.append(f"the target's sequence goes on after the source's ends: "
                            f"{tok.decode(seq[-extra:], skip_special_tokens=False)!r} after "
                            f"{tok.decode(tail, skip_special_tokens=False)!r} ({why})")
    return {
        "tokens": len(ids), "trained": len(trained), "masked": len(ids) - len(trained),
        "label_convention": convention, "label_agreement": agree, "labels_unused_by_shift": unused,
        "media_tokens": media_t, "source_media_tokens": media_s, "media_trained": media_trained,
        "turns": len(regions), "prompt_tokens": [s for _, s, _ in regions],
        "full_match": diverge is None, "first_divergence": diverge, "problems": problems,
        "decoded": marked_sample(tok, ids, targets, media_id),
    }


def declared_media_id(folder):
    """The media token id the source's config declares (``image_token_id`` / ``image_token_index``), or None."""
    import json

    with open(os.path.join(folder, "config.json"), encoding="utf-8") as fh:
        cfg = json.load(fh)
    return next((cfg[k] for k in ("image_token_id", "image_token_index") if isinstance(cfg.get(k), int)), None)


def collapse_media_runs(example, media_id):
    """The example with every run of the media token written as one token (labels of the run's first position),
    and the run lengths. For a source whose processor cannot process an image at all (a bare tokenizer), its
    ids hold the template's one placeholder token per image: the run the target's pipeline writes there is then
    compared as that one token, and its length is the MODEL's business (the forward's feature count check)."""
    ids, labels, runs = [], [], []
    for i, (t, lab) in enumerate(zip(example["input_ids"], example["labels"])):
        if t == media_id and i and example["input_ids"][i - 1] == media_id:
            runs[-1] += 1
            continue
        if t == media_id:
            runs.append(1)
        ids.append(t)
        labels.append(lab)
    return {**example, "input_ids": ids, "labels": labels}, runs


# --- a source whose processor does not expand media and whose placeholder is not one declared token -------------
# (InternVL-chat: AutoProcessor is a bare tokenizer, the template writes a literal ``<image>\n`` of several text
# tokens, the config declares no image token; the remote code's own chat() puts ``<img>`` + ``<IMG_CONTEXT>``xN +
# ``</img>`` in its place). The reference is then the source's rendering cut at each placeholder; every piece of text
# between placeholders must be in the target's ids id for id, and what the target writes in a placeholder's place
# is its media span, reported, with the media token read from that span.

IMAGE_PROBE = "QQIMAGEPROBEQQ"


def placeholder_text(proc):
    """What the source's chat template writes for one image item, measured: a one-image user turn rendered with
    the image and with a text marker in its place differ only there. None when the renders do not line up, or
    when the template takes string content only (it renders no image item: the sample's own text holds them)."""
    try:
        with_image = render(proc, [{"role": "user", "content": [{"type": "image"}]}], False)
        with_text = render(proc, [{"role": "user", "content": [{"type": "text", "text": IMAGE_PROBE}]}], False)
    except Exception:  # probe boundary: a string-only template raises on content items
        return None
    if with_text.count(IMAGE_PROBE) != 1:
        return None
    pre, post = with_text.split(IMAGE_PROBE)
    if not (with_image.startswith(pre) and with_image.endswith(post)) or len(with_image) <= len(pre) + len(post):
        return None
    return with_image[len(pre):len(with_image) - len(post)]


def source_pieces(proc, messages, generation_prompt, placeholder):
    """The source's rendering as token ids of the text between image placeholders (n_images + 1 pieces), each
    piece tokenized on its own — what the source's remote code does when it puts the media run in a placeholder's
    place and tokenizes the text around it. None when the rendering does not hold one placeholder per image."""
    text = render_messages(proc, messages, generation_prompt)
    n_images = sum(m["content"].count("<image>") for m in messages)
    if text.count(placeholder) != n_images:
        return None
    tok = getattr(proc, "tokenizer", proc)
    bos = getattr(tok, "bos_token", None)
    pieces = []
    for k, piece in enumerate(text.split(placeholder)):
        specials = k == 0 and not (bos and text.startswith(bos))
        pieces.append(list(tok(piece, add_special_tokens=specials)["input_ids"]) if piece else [])
    return pieces


def placeholder_source_ids(placeholder, media_id):
    """A ``source_ids`` for check_sample: each placeholder written as ONE ``media_id`` (the target's media spans
    are collapsed to the same one token by ``align_media_spans``)."""
    def ids(proc, messages, images, generation_prompt):
        pieces = source_pieces(proc, messages, generation_prompt, placeholder)
        if pieces is None:
            return source_ids(proc, messages, images, generation_prompt)
        out = list(pieces[0])
        for piece in pieces[1:]:
            out += [media_id] + piece
        return out
    return ids


def _find(seq, sub, start):
    for q in range(start, len(seq) - len(sub) + 1):
        if seq[q:q + len(sub)] == sub:
            return q
    return None


def media_spans(ids, pieces, probe_len=8):
    """[(start, end)] of the target ids written in each placeholder's place: the text before a placeholder must
    be the target's ids id for id; the span ends where the next piece's first ids start (the shortest span).
    (spans, problem): the problem names the first piece that is not where it must be (spans found so far kept)."""
    if ids[:len(pieces[0])] != pieces[0]:
        return [], None  # the prompt check names the first differing id
    spans, pos = [], len(pieces[0])
    for k, piece in enumerate(pieces[1:], 1):
        probe = piece[:probe_len]
        if not probe:
            # two placeholders back to back (or one at the very end): their spans cannot be told apart by text
            return spans, f"image {k}: no text between it and the next placeholder to align the spans by"
        q = _find(ids, probe, pos + 1)
        if q is None:
            return spans, (f"the text after image {k} (source ids {probe}) is not in the target's ids after "
                           f"position {pos}: the text around the media run differs from the source's")
        spans.append((pos, q))
        pos = q + len(piece)
        if ids[q:pos] != piece:
            break  # the piece differs later on: the prompt/label checks report where
    return spans, None


def media_token_of(ids, spans):
    """The media token, read from the target's spans: the id of the longest run of one id in each span, the same
    in every span. (id, problem). On a tie (``<img><IMG_CONTEXT></img>``: every run is 1 long, one context token per
    image) an id inside the span wins over the span's first and last ids, which are its start/end markers — the
    first id used to win, so the marker ``<img>`` was taken for the media token (live run 7's G2)."""
    found = set()
    for s, e in spans:
        runs: dict[int, int] = {}
        run = 0
        for j in range(s, e):
            run = run + 1 if j > s and ids[j] == ids[j - 1] else 1
            runs[ids[j]] = max(runs.get(ids[j], 0), run)
        length = max(runs.values(), default=0)
        tied = [i for i in dict.fromkeys(ids[s:e]) if runs[i] == length]
        inner = [i for i in tied if i not in (ids[s], ids[e - 1])]
        found.add((inner or tied or [None])[0])
    if len(found) != 1:
        return None, f"the target's media spans have no common media token (longest runs of {sorted(found)})"
    return found.pop(), None


def named_in_remote_code(folder, token):
    """The source's own .py files that name ``token`` as a string literal (evidence for the media token)."""
    names = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), encoding="utf-8") as fh:
                text = fh.read()
            if f'"{token}"' in text or f"'{token}'" in text:
                names.append(name)
    return names


def align_media_spans(example, pieces, declared=None):
    """(collapsed example, report, problems): the target example with each media span written as one media token
    (label: the media id when any position of the span trains, so check_sample reports trained media), and what
    each span is — its length, decoded form and media-token count."""
    ids, labels = list(example["input_ids"]), list(example["labels"])
    spans, problem = media_spans(ids, pieces)
    problems = [problem] if problem else []
    media_id, why = media_token_of(ids, spans) if spans else (declared, None)
    if why:
        problems.append(why)
    if declared is not None and media_id is not None and media_id != declared:
        problems.append(f"the target's media spans repeat id {media_id}, the source's config declares {declared}")
    runs = []
    out_ids, out_labels, at = [], [], 0
    for s, e in spans:
        out_ids += ids[at:s] + [media_id]
        trained = any(lab != IGNORE for lab in labels[s:e])
        out_labels += labels[at:s] + [media_id if trained else IGNORE]
        runs.append({"start": s, "length": e - s, "media_tokens": ids[s:e].count(media_id)})
        at = e
    out_ids += ids[at:]
    out_labels += labels[at:]
    return {**example, "input_ids": out_ids, "labels": out_labels}, runs, media_id, problems


def placeholder_parity(proc, folder, sample, images, example, declared):
    """check_sample for a source that does not expand media itself, by alignment around each placeholder."""
    tok = getattr(proc, "tokenizer", proc)
    placeholder = placeholder_text(proc)
    if placeholder is None:
        return None
    pieces = source_pieces(proc, sample["messages"], False, placeholder)
    if pieces is None:
        return None
    collapsed, runs, media_id, problems = align_media_spans(example, pieces, declared)
    # no span found (the text before the first image already differs): compared with the source's plain rendering,
    # whose first differing id the prompt check names
    result = check_sample(proc, sample, images, collapsed, media_id,
                          ids_of=None if media_id is None else placeholder_source_ids(placeholder, media_id))
    ids = list(example["input_ids"])
    for run in runs:
        s = run["start"]
        run["decoded"] = tok.decode(ids[s:s + run["length"]], skip_special_tokens=False)
    name = tok.convert_ids_to_tokens(media_id) if media_id is not None else None
    # the reader sees the target's own sequence (spans uncollapsed) and its real length
    targets = trained_targets(list(example["labels"]), result["label_convention"])[0]
    result.update(decoded=marked_sample(tok, ids, targets, media_id), tokens=len(ids),
                  masked=len(ids) - result["trained"])
    result["problems"] = problems + result["problems"]
    result["media_runs"] = [r["length"] for r in runs]
    result["media_spans"] = runs
    result["placeholder"] = {"text": placeholder, "source_ids": list(tok(placeholder, add_special_tokens=False)
                                                                     ["input_ids"])}
    result["media_token"] = {"id": media_id, "text": name, "from": "the target's media spans (longest run)",
                             "declared_by_config": declared,
                             "named_in_remote_code": named_in_remote_code(folder, name) if name else []}
    return result


def one_token_placeholder(proc, media_id):
    """True when the source's template writes an image as the one declared media token (patchlm): the target's
    media runs are then compared as that token (``collapse_media_runs``)."""
    placeholder = placeholder_text(proc)
    if media_id is None or placeholder is None:
        return False
    tok = getattr(proc, "tokenizer", proc)
    return list(tok(placeholder, add_special_tokens=False)["input_ids"]) == [media_id]


def data_parity(source, data_path, examples, media_id, trust_remote_code=False):
    """Compare the mapped examples with the source's own processing of the same raw samples (by position)."""
    import json

    from PIL import Image

    from _processor import load_processor

    proc = load_processor(source, trust_remote_code)[0]
    # evidence of where the media expansion happens: a processor with an image processor expands it itself (its
    # ids are compared id for id); one without cannot, so the expansion is outside it (the model's own code)
    processor_expands = getattr(proc, "image_processor", None) is not None
    if media_id is None:
        media_id = declared_media_id(source)
    with open(data_path, encoding="utf-8") as fh:
        raw = json.load(fh)
    root = os.path.dirname(os.path.abspath(data_path))
    samples, problems, aligned = [], [], False
    for i, example in enumerate(examples):
        if i >= len(raw):
            break
        sample = raw[i]
        if not isinstance(sample, dict) or not isinstance(sample.get("messages"), list):
            # the chat-template oracle reads ShareGPT records; name what it found, where
            problems.append(f"sample {i}: the record in {os.path.abspath(data_path)} has keys "
                            f"{sorted(sample) if isinstance(sample, dict) else type(sample).__name__}; this oracle "
                            "reads 'messages' (+ 'images'): a source whose own training code reads another format "
                            "is compared through that code")
            continue
        paths = [p if os.path.isabs(p) else os.path.join(root, p) for p in sample.get("images") or []]
        mapped = [os.path.basename(p) for p in example.get("images") or [] if isinstance(p, str)]
        if mapped and [os.path.basename(p) for p in paths] != mapped:
            problems.append(f"sample {i}: the target's example has images {mapped}, the raw sample {paths}")
            continue
        images = [Image.open(p).convert("RGB") for p in paths]
        runs, result = None, None
        if not processor_expands and not one_token_placeholder(proc, media_id):
            result = placeholder_parity(proc, source, sample, images, example, media_id)
            aligned = aligned or result is not None
        if result is None:
            if not processor_expands and media_id is not None:
                example, runs = collapse_media_runs(example, media_id)
            result = check_sample(proc, sample, images, example, media_id)
            result["media_runs"] = runs  # None: compared id for id, the source processor expanded the media itself
        samples.append(result)
        problems += [f"sample {i}: {p}" for p in result["problems"]]
    text_problems, records_read = record_text_problems(proc, raw if isinstance(raw, list) else [])
    problems += text_problems
    totals = {k: sum(s[k] for s in samples) for k in ("tokens", "trained", "masked", "media_tokens",
                                                      "source_media_tokens", "media_trained",
                                                      "labels_unused_by_shift")}
    conventions = sorted({s["label_convention"] for s in samples})
    if len(conventions) > 1:
        problems.append(f"the samples' labels follow different conventions ({', '.join(conventions)})")
    if aligned and samples:
        media_id = (samples[0].get("media_token") or {}).get("id", media_id)
    if problems:
        problems.append(f"(the oracle read {os.path.abspath(data_path)}: each record's 'messages' and 'images', "
                        "rendered with the source's chat template and processor)")
    return {"samples_compared": len(samples), "records_text_read": records_read, "media_token_id": media_id, **totals,
            "oracle": "the source's chat template + processor", "data_file": os.path.abspath(data_path),
            "keys_read": ["messages", "images"],
            "label_convention": conventions[0] if len(conventions) == 1 else conventions,
            "media_expanded_by": "source processor" if processor_expands else
            ("not the source processor (it has no image processor): the source's text around each placeholder "
             "compared id for id, the target's span in its place is the media run (its length is the model's "
             "business: the forward's feature count)") if aligned else
            "not the source processor (it has no image processor): runs compared as one placeholder each",
            "prompt_match": not any("prompt ids differ" in p for p in problems),
            "decoded_sample": samples[0]["decoded"] if samples else None,
            "media_token": samples[0].get("media_token") if samples else None,
            "per_sample": [{k: v for k, v in s.items() if k != "decoded"} for s in samples],
            "passed": bool(samples) and not problems, "problems": problems}
