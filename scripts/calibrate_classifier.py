"""Calibrate the classifier's lexical (BM25) stage on the TUNING half of the real-log corpus; write calibration.json.

For every tuning-half failure (``--population all``, the default) or only those the deterministic stage leaves
undecided (``--population undecided``: with this corpus only a handful, too few to rest a threshold on), the BM25
owner vote is computed with that excerpt's own source left out of the index (leave-one-out), and recorded as
(margin, owner correct?). The excerpts regex does decide still measure how reliable a vote of a given margin is,
because their own real examples are left out; they are easier than the undecided ones, so the held-out figures
(scripts/knowledge_accuracy.py) are what tells whether the threshold holds. The
acceptance threshold is the smallest margin above which the votes' precision is at least --target with at least
--min-support votes; the confidence reported for an accepted vote is the Laplace-smoothed precision of the votes at
or above its margin. The held-out half is never read here.

    python scripts/calibrate_classifier.py [--target 0.9] [--min-support 3] [--out PATH] [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from msmigrate.knowledge.catalog import load_catalog
from msmigrate.knowledge.classifier import CALIBRATION_FILE, classify, lexical
from msmigrate.knowledge.real_log_corpus import load_corpus
from msmigrate.knowledge.root_cause import extract

STRICT = {"min_margin": None, "bins": []}  # lexical stage off: find what the deterministic stage leaves


def lexical_votes(split: str = "tuning", population: str = "all", max_round: int | None = None
                  ) -> list[tuple[float, bool, str]]:
    catalog = load_catalog()
    votes = []
    for entry in load_corpus(split):
        if entry.healthy or (max_round is not None and entry.round > max_round):
            continue
        if population == "undecided" and \
                classify(entry.log, calibration=STRICT, exclude_source=entry.source).method != "none":
            continue  # decided deterministically
        root = extract(entry.log)
        vote = lexical(root.cause, catalog, exclude_source=entry.source) if root.failed else None
        if vote is not None:
            votes.append((vote.margin, vote.owner == entry.owner, entry.name))
    return votes


def calibrate(votes: list[tuple[float, bool, str]], target: float, min_support: int, population: str = "all",
              max_round: int | None = None) -> dict:
    ordered = sorted(votes, key=lambda v: -v[0])
    bins, threshold, chosen_precision = [], None, None
    for i in range(len(ordered)):
        if i + 1 < len(ordered) and ordered[i + 1][0] == ordered[i][0]:
            continue  # equal margins enter together
        above = ordered[: i + 1]
        correct = sum(ok for _, ok, _ in above)
        precision = (correct + 1) / (len(above) + 2)  # Laplace: small samples are not trusted fully
        raw = correct / len(above)
        bins.append({"margin": ordered[i][0], "n": len(above), "correct": correct, "precision": round(precision, 3)})
        if raw >= target and len(above) >= min_support:
            threshold, chosen_precision = ordered[i][0], precision
    bins.sort(key=lambda b: b["margin"])  # ascending: the last bin a margin clears gives its confidence
    return {"min_margin": threshold, "precision": chosen_precision, "target": target, "min_support": min_support,
            "population": population, "max_round": max_round, "votes": len(votes), "bins": [b for b in bins if threshold is not None and b["margin"] >= threshold],
            "note": "written by scripts/calibrate_classifier.py from the tuning half only (leave-one-source-out)"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=float, default=0.9, help="required precision of accepted votes")
    parser.add_argument("--min-support", type=int, default=3, help="fewest votes a threshold may rest on")
    parser.add_argument("--population", choices=("all", "undecided"), default="all",
                        help="tuning excerpts whose votes calibrate the threshold")
    parser.add_argument("--max-round", type=int, default=None,
                        help="use only corpus rounds up to this one (later rounds stay untouched by any tuning)")
    parser.add_argument("--out", type=Path, default=CALIBRATION_FILE)
    parser.add_argument("--dry-run", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    votes = lexical_votes("tuning", args.population, args.max_round)
    result = calibrate(votes, args.target, args.min_support, args.population, args.max_round)
    for margin, ok, name in sorted(votes, key=lambda v: -v[0]):
        print(f"  {margin:6.3f} {'ok ' if ok else 'BAD'} {name}")
    print(f"tuning votes: {len(votes)}; threshold: {result['min_margin']}; precision: {result['precision']}")
    if not args.dry_run:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
