"""Calibrate the classifier's lexical (BM25) stage on the TUNING half of the real-log corpus; write calibration.json.

For the tuning-half failures the deterministic stage leaves undecided (``--population undecided``, the default:
the excerpts the lexical stage is actually asked about at run time) or every tuning-half failure (``--population
all``), the BM25 owner vote is computed with that excerpt's own source left out of the index (leave-one-out), and
recorded as (margin, owner correct?). Votes on excerpts regex decides are easier (their message is in the index
under another source); with round 4 of the corpus a threshold fitted on all of them accepted votes that were right
far less often on the held-out half than on the tuning half, so the default is the undecided population. The
acceptance threshold is the smallest margin above which the votes' precision is at least --target with at least
--min-support votes; the confidence reported for an accepted vote is the Laplace-smoothed precision of the votes at
or above its margin.

The share of those votes that named the labelled owner (``vote_correct`` of ``votes``) is recorded too: the classify
prompt shows it with the lexical neighbours, so the LLM knows how little a neighbour's wording is worth.

The same run records, per failure case, how its regex hits on the tuning half agree with the owner labels
(``regex_cases``: hits, agree, decisive). A case is *not decisive* (the classifier turns its match into an
abstention whose first candidate it is) only when its hits show it misses --target: when even the optimistic end of
its agreement's one-sided Wilson interval (``--confidence``, default 0.9) is below --target. A few hits with one
disagreement (5 of 6, 6 of 7) do not show that; they used to (any share below --target did), which discarded far
more right answers than wrong ones on the held-out half (issue 37). The held-out half is never read here.

    python scripts/calibrate_classifier.py [--target 0.9] [--min-support 3] [--out PATH] [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from statistics import NormalDist
from pathlib import Path

from msmigrate.knowledge.catalog import load_catalog
from msmigrate.knowledge.classifier import CALIBRATION_FILE, classify, lexical
from msmigrate.knowledge.real_log_corpus import load_corpus
from msmigrate.knowledge.root_cause import extract

STRICT = {"min_margin": None, "bins": []}  # lexical stage off: find what the deterministic stage leaves


def lexical_votes(split: str = "tuning", population: str = "all", max_round: int | None = None,
                  regex_cases: dict[str, dict[str, int]] | None = None, target: float = 0.9
                  ) -> list[tuple[float, bool, str]]:
    catalog = load_catalog()
    # undecided = what the classifier leaves to the lexical stage: no regex hit, or a hit on a non-decisive case
    strict = {**STRICT, "regex_cases": regex_cases or {}, "target": target}
    votes = []
    for entry in load_corpus(split):
        if entry.healthy or (max_round is not None and entry.round > max_round):
            continue
        if population == "undecided" and \
                classify(entry.log, calibration=strict, exclude_source=entry.source).method != "none":
            continue  # decided deterministically
        root = extract(entry.log)
        vote = lexical(root.cause, catalog, exclude_source=entry.source) if root.failed else None
        if vote is not None:
            votes.append((vote.margin, vote.owner == entry.owner, entry.name))
    return votes


def regex_reliability(split: str = "tuning", max_round: int | None = None) -> dict[str, dict[str, int]]:
    """Per failure case: how many tuning excerpts its regex decides, and in how many the case's owner is the label."""
    catalog = load_catalog()
    cases: dict[str, dict[str, int]] = {}
    for entry in load_corpus(split):
        if entry.healthy or (max_round is not None and entry.round > max_round):
            continue
        result = classify(entry.log, catalog=catalog, calibration=STRICT)
        if result.method == "regex" and result.case_id:
            record = cases.setdefault(result.case_id, {"hits": 0, "agree": 0})
            record["hits"] += 1
            record["agree"] += result.owner == entry.owner
    return dict(sorted(cases.items()))


def wilson_upper(agree: int, hits: int, confidence: float) -> float:
    """The upper end of the one-sided Wilson score interval of a success share: how high the true agreement of a
    case could plausibly be, given ``agree`` of ``hits`` (small samples get a wide interval)."""
    if hits == 0:
        return 1.0
    z = NormalDist().inv_cdf(confidence)
    share = agree / hits
    centre = share + z * z / (2 * hits)
    spread = z * math.sqrt(share * (1 - share) / hits + z * z / (4 * hits * hits))
    return min(1.0, (centre + spread) / (1 + z * z / hits))


def with_decisiveness(regex_cases: dict[str, dict[str, int]], target: float,
                      confidence: float) -> dict[str, dict[str, object]]:
    """Each case's record with ``decisive``: False only when its tuning hits show it below the target."""
    return {case: {**rec, "decisive": rec["agree"] == rec["hits"] or
                   wilson_upper(rec["agree"], rec["hits"], confidence) >= target}
            for case, rec in regex_cases.items()}


def calibrate(votes: list[tuple[float, bool, str]], target: float, min_support: int, population: str = "all",
              max_round: int | None = None, regex_cases: dict[str, dict[str, int]] | None = None) -> dict:
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
            "population": population, "max_round": max_round, "votes": len(votes),
            # how often the vote named the labelled owner at all: what the classify prompt tells the LLM a lexical
            # neighbour is worth (agent/nodes/classify.py, candidate_basis)
            "vote_correct": sum(ok for _, ok, _ in votes),
            "bins": [b for b in bins if threshold is not None and b["margin"] >= threshold],
            "regex_cases": regex_cases or {},
            "regex_rule": "not decisive when the one-sided Wilson upper bound of agree/hits is below target",
            "note": "written by scripts/calibrate_classifier.py from the tuning half only (leave-one-source-out)"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=float, default=0.9, help="required precision of accepted votes")
    parser.add_argument("--min-support", type=int, default=3, help="fewest votes a threshold may rest on")
    parser.add_argument("--population", choices=("all", "undecided"), default="undecided",
                        help="tuning excerpts whose votes calibrate the threshold")
    parser.add_argument("--max-round", type=int, default=None,
                        help="use only corpus rounds up to this one (later rounds stay untouched by any tuning)")
    parser.add_argument("--confidence", type=float, default=0.9,
                        help="one-sided confidence of the interval that must fall below --target before a case's "
                             "regex is treated as not decisive")
    parser.add_argument("--out", type=Path, default=CALIBRATION_FILE)
    parser.add_argument("--dry-run", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    regex_cases = with_decisiveness(regex_reliability("tuning", args.max_round), args.target, args.confidence)
    for case, rec in regex_cases.items():
        if rec["agree"] < rec["hits"]:
            print(f"  regex {case}: {rec['agree']}/{rec['hits']} -> {'decisive' if rec['decisive'] else 'NOT decisive'}"
                  f" (upper bound {wilson_upper(rec['agree'], rec['hits'], args.confidence):.3f})")
    votes = lexical_votes("tuning", args.population, args.max_round, regex_cases, args.target)
    result = {**calibrate(votes, args.target, args.min_support, args.population, args.max_round, regex_cases),
              "confidence": args.confidence}
    for margin, ok, name in sorted(votes, key=lambda v: -v[0]):
        print(f"  {margin:6.3f} {'ok ' if ok else 'BAD'} {name}")
    print(f"tuning votes: {len(votes)}; threshold: {result['min_margin']}; precision: {result['precision']}")
    if not args.dry_run:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
