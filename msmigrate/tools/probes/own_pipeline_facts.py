"""Probe (runs in the target runtime): what the source's OWN training pipeline makes of its first records — measured,
so the plan can say which positions train rather than quote the code that decides it.

Usage: python own_pipeline_facts.py --source <folder> --data <records file> --facts <training facts json>
       [--records 2] [--trust-remote-code]
Prints one line ``MSMIGRATE_PROBE_RESULT {json}``: per record the sequence length, the trained positions (in the
source's label convention) and each trained stretch decoded, the media runs (lengths; negative ids or the
declared media token), and the batch's keys with their kinds. Imports nothing from msmigrate (``_own_pipeline``
builds the source's dataset + collator).
"""
import argparse
import json
import re
import sys

MARKER = "MSMIGRATE_PROBE_RESULT "
# a token written as a tag (<img>, </img>, <|im_start|>, <｜end▁of▁sentence｜>): what a port must write too
TAG = re.compile(r"^<[^<>\s]{1,40}>$")


def tags_written(tok, ids):
    """The tag-shaped tokens among the ids the source's own pipeline wrote, in order of first use (measured)."""
    out = []
    for t in dict.fromkeys(i for i in ids if i >= 0):
        text = tok.decode([t])
        if TAG.match(text) and text not in out:
            out.append(text)
    return out


def at_media(tok, ids, flags):
    """What the source writes at its media positions: the decoded token(s), negative ids as themselves."""
    seen = dict.fromkeys(t for t, f in zip(ids, flags) if f)
    return [str(t) if t < 0 else tok.decode([t]) for t in seen]


def emit(payload):
    print(MARKER + json.dumps(payload, default=str), flush=True)


def stretches(tok, ids, targets):
    """The trained positions as runs of consecutive sequence positions, each decoded (what the source trains)."""
    out, run = [], []
    for j in sorted(targets):
        if run and j != run[-1] + 1:
            out.append(run)
            run = []
        run.append(j)
    if run:
        out.append(run)
    return [tok.decode([targets[j] for j in r]) for r in out]


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--facts", required=True)
    ap.add_argument("--records", type=int, default=2)
    ap.add_argument("--trust-remote-code", action="store_true")
    args = ap.parse_args(argv)
    try:
        from transformers import AutoTokenizer

        from _data_parity import trained_targets
        from _own_pipeline import _full_runs, _to_list, own_batches, source_media_flags

        with open(args.facts, encoding="utf-8") as fh:
            facts = json.load(fh)
        tok = AutoTokenizer.from_pretrained(args.source, trust_remote_code=args.trust_remote_code)
        convention = "shifted" if facts.get("label_convention") == "pre-shifted" else "aligned"
        records = []
        for i, batch in own_batches(args.source, args.data, facts, args.records, args.trust_remote_code):
            ids, labels = _to_list(batch["input_ids"]), _to_list(batch["labels"])
            if "attention_mask" in batch:
                keep = sum(_to_list(batch["attention_mask"]))
                ids, labels = ids[:keep], labels[:keep]
            targets, _ = trained_targets(labels, convention)
            flags = source_media_flags(batch, ids)
            records.append({"record": i, "tokens": len(ids), "trained": len(targets),
                            "trained_text": stretches(tok, ids, targets),
                            "media_runs": [n for _, n in _full_runs(ids, flags)],
                            "tags_written": tags_written(tok, ids), "at_media": at_media(tok, ids, flags),
                            "keys": {k: type(v).__name__ for k, v in batch.items()}})
    except Exception as exc:  # probe boundary: the failure is the result
        import traceback

        traceback.print_exc()
        emit({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    emit({"records": records, "label_convention": facts.get("label_convention")})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
