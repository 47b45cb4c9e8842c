"""Probe (Megatron route, gate G2): the chat format the delivered data JSON's ``template`` gives the samples against
the source's OWN chat template, turn by turn.

    python megatron_template_parity.py --target ROOT --data-json REL --source HF_DIR [--samples 2]

Runs in the target runtime (transformers: the source's processor or tokenizer renders its own template); imports
nothing from msmigrate and nothing from the target: the target's template is READ, by AST, from the call that
registers it under that name (a call with ``name="<template>"`` in the target's ``mindspeed_mm`` sources, its
formatter keywords given directly or through a parameter object: ``format_user`` / ``format_assistant`` /
``format_system`` / ``format_prefix`` with ``slots=[...]``, ``default_system``, ``efficient_eos``). A slot is a
string with ``{{content}}`` or a set naming a special token (``{"eos_token"}``), rendered with the source
tokenizer's text for it. A formatter the registration leaves out takes the registry's default: the content alone
(the assistant's followed by eos unless ``efficient_eos``); the system turn the user's format.

The framework's dataset builds turn 0 as prefix + system (the sample's, else the template's default) + user, then
each turn by its role's formatter. Both sides render the samples' conversations as text with the media
placeholders (``<image>``) taken out — the media expansion is the processor's and the mm plugin's business,
measured elsewhere (the plan's media expansion) — and are compared per assistant turn: the text before the answer
(role markers, system prompt, separators) must be the source's ``add_generation_prompt=True`` rendering of the
turns before it, and the whole conversation must end as the source's (one trailing end-of-text token either side
tolerated). A leading bos text is left off both sides (the tokenizer adds it). Not compared: token ids after the
plugin's media expansion and the label mask (the framework's dataset does that, in its own runtime).
"""
import argparse
import ast
import json
import os
from pathlib import Path

RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "
FORMATTERS = ("format_user", "format_assistant", "format_system", "format_prefix")


def emit(payload):
    print(RESULT_MARKER + json.dumps(payload, default=str), flush=True)


def _literal(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _keywords(call):
    """A call's keywords, those of call arguments merged in (a parameter object built inline)."""
    out = {}
    for node in list(call.args) + [k.value for k in call.keywords]:
        if isinstance(node, ast.Call):
            out.update({k: v for k, v in _keywords(node).items() if k not in out})
    out.update({k.arg: k.value for k in call.keywords if k.arg})
    return out


def find_template(target, name):
    """(fields, file) of the call registering template ``name`` in the target's mindspeed_mm sources."""
    for path in sorted((Path(target) / "mindspeed_mm").rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if name not in text:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            kw = _keywords(node)
            if "name" not in kw or _literal(kw["name"]) != name:
                continue
            if not any(f in kw for f in FORMATTERS):
                continue
            fields = {}
            for f in FORMATTERS:
                if isinstance(kw.get(f), ast.Call):
                    slots = _keywords(kw[f]).get("slots")
                    fields[f] = _literal(slots) if slots is not None else []
            for f in ("default_system", "efficient_eos"):
                if f in kw:
                    fields[f] = _literal(kw[f])
            return fields, str(path.relative_to(target))
    return None, None


def render_slots(slots, content, tok):
    out = []
    for slot in slots or []:
        if isinstance(slot, str):
            out.append(slot.replace("{{content}}", content))
        elif isinstance(slot, (set, frozenset, list, tuple)):
            for special in slot:
                out.append(getattr(tok, str(special), None) or "")
    return "".join(out)


def target_render(fields, messages, tok):
    """The framework's turn layout (module docstring) with the registered formatters, as text."""
    eos = [] if fields.get("efficient_eos") else [{"eos_token"}]
    user = fields.get("format_user") or ["{{content}}"]
    assistant = fields.get("format_assistant") or ["{{content}}"] + eos
    system_fmt = fields.get("format_system") or user
    system = next((m["content"] for m in messages if m["role"] == "system"), None) or fields.get("default_system")
    text = render_slots(fields.get("format_prefix"), "", tok)
    if system:
        text += render_slots(system_fmt, system, tok)
    for m in messages:
        if m["role"] == "user":
            text += render_slots(user, m["content"], tok)
        elif m["role"] == "assistant":
            text += render_slots(assistant, m["content"], tok)
    return text


def source_render(proc, messages, generation_prompt):
    """The source's chat template: structured text items first (what processors take), else plain strings."""
    structured = [{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]} for m in messages]
    try:
        return proc.apply_chat_template(structured, tokenize=False, add_generation_prompt=generation_prompt)
    except Exception:  # probe boundary: the template is the source's code; the string form is the other it takes
        return proc.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)


def _strip_bos(text, tok):
    bos = getattr(tok, "bos_token", None)
    return text[len(bos):] if bos and text.startswith(bos) else text


def _where(a, b):
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return i, a[max(0, i - 20):i + 30], b[max(0, i - 20):i + 30]


def conversation(record, attr):
    """The record's turns as {role, content} with the media placeholders taken out, roles mapped by ``attr``."""
    roles = {attr.get("user_tag") or "user": "user", attr.get("assistant_tag") or "assistant": "assistant",
             attr.get("system_tag") or "system": "system"}
    out = []
    for m in record.get(attr.get("messages") or "messages") or []:
        role = roles.get(m.get(attr.get("role_tag") or "role"))
        content = m.get(attr.get("content_tag") or "content")
        if role and isinstance(content, str):
            out.append({"role": role, "content": content.replace("<image>", "").replace("<video>", "")})
    return out


def load_renderer(source):
    import transformers

    try:
        proc = transformers.AutoProcessor.from_pretrained(source)
        if getattr(proc, "chat_template", None):
            return proc, getattr(proc, "tokenizer", proc)
    except Exception:  # probe boundary: a folder without a processor still has a tokenizer with the template
        pass
    tok = transformers.AutoTokenizer.from_pretrained(source)
    return tok, tok


def run(a):
    target = Path(a.target).resolve()
    doc = json.loads((target / a.data_json).read_text(encoding="utf-8"))
    ds = doc.get("dataset_param") or {}
    basic, attr = ds.get("basic_parameters") or {}, ds.get("attr") or {}
    name = basic.get("template")
    if not name:
        return {"error": f"{a.data_json} names no basic_parameters.template: the chat format is unknown"}
    fields, where = find_template(target, name)
    if fields is None:
        return {"error": f"template {name!r} is not registered in the target's mindspeed_mm sources (no call with "
                         f"name={name!r} and format_* keywords): its chat format could not be read"}
    data = Path(basic.get("dataset") or "")
    data = data if data.is_absolute() else target / data
    records = json.loads(data.read_text(encoding="utf-8"))
    proc, tok = load_renderer(a.source)
    problems, turns, samples, first = [], 0, 0, None
    for i, record in enumerate(records[:a.samples]):
        msgs = conversation(record, attr)
        if not any(m["role"] == "assistant" for m in msgs):
            problems.append(f"sample {i}: no assistant turn under the data JSON's attr tags")
            continue
        samples += 1
        for k, m in enumerate(msgs):
            if m["role"] != "assistant":
                continue
            src = _strip_bos(source_render(proc, msgs[:k], True), tok)
            tgt = _strip_bos(target_render(fields, msgs[:k], tok), tok)
            first = first or {"source": src, "target": tgt}
            turns += 1
            if src != tgt:
                at, s, t = _where(src, tgt)
                problems.append(f"sample {i}, turn {k}: the text before the answer differs from the source's chat "
                                f"template at character {at}: template {name!r} gives {t!r}, the source {s!r}")
                break
        else:
            src = _strip_bos(source_render(proc, msgs, False), tok).rstrip()
            tgt = _strip_bos(target_render(fields, msgs, tok), tok).rstrip()
            ends = {x for x in (getattr(tok, "eos_token", None),) if x}
            if src != tgt and not any(src + e == tgt or tgt + e == src for e in ends):
                at, s, t = _where(src, tgt)
                problems.append(f"sample {i}: the conversation ends differently from the source's chat template "
                                f"(at character {at}: template {name!r} gives {t!r}, the source {s!r})")
    if not turns:
        problems.append("no assistant turn was compared: the template parity checked nothing")
    return {"ok": not problems, "problems": problems[:6], "template": name, "registered_in": where,
            "samples_compared": samples, "turns_compared": turns, "data_file": str(data),
            "first_prompt": first}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--data-json", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--samples", type=int, default=2)
    a = ap.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        emit(run(a))
    except Exception as exc:  # probe boundary: unreadable files, the source's template raising: data, not a crash
        emit({"error": f"{type(exc).__name__}: {exc}"})


if __name__ == "__main__":
    main()
