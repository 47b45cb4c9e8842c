"""Score the failure classifier on the labeled log set (msmigrate/knowledge/labeled/*.yaml).

Prints owner-phase accuracy, case-id accuracy, the method mix and the owner confusion matrix
(rows = expected, columns = predicted; "none" = classifier abstained). Exit code 1 if owner accuracy < --min-owner.

    python scripts/knowledge_accuracy.py [--labeled DIR] [--min-owner 0.9] [--bm25-only] [--verbose]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from msmigrate.knowledge.labeled_set import load_labeled
from msmigrate.knowledge.classifier import classify

OWNERS = ["model", "data", "config", "environment", "none"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labeled", type=Path, default=None, help="folder of labeled logs (default: packaged set)")
    parser.add_argument("--min-owner", type=float, default=0.9, help="fail below this owner accuracy")
    parser.add_argument("--bm25-only", action="store_true", help="skip the regex stage (measures the fallback)")
    parser.add_argument("--verbose", action="store_true", help="list every miss")
    args = parser.parse_args(argv)

    samples = load_labeled(args.labeled)
    confusion: Counter[tuple[str, str]] = Counter()
    methods: Counter[str] = Counter()
    owner_ok = case_ok = 0
    misses = []
    for sample in samples:
        result = classify(sample.log, use_regex=not args.bm25_only)
        predicted_owner = result.owner or "none"
        methods[result.method] += 1
        confusion[(sample.expected_owner, predicted_owner)] += 1
        owner_ok += predicted_owner == sample.expected_owner
        case_ok += result.case_id == sample.expected_case
        if result.case_id != sample.expected_case:
            misses.append((sample.name, sample.expected_case, result.case_id, result.method))

    total = len(samples)
    owner_acc, case_acc = owner_ok / total, case_ok / total
    print(f"labeled logs: {total}" + (" (regex stage disabled)" if args.bm25_only else ""))
    print(f"owner-phase accuracy: {owner_acc:.1%} ({owner_ok}/{total})")
    print(f"case-id accuracy:     {case_acc:.1%} ({case_ok}/{total})")
    print("methods: " + ", ".join(f"{m}={n}" for m, n in sorted(methods.items())))
    print("\nowner confusion matrix (rows expected, columns predicted)")
    width = max(len(o) for o in OWNERS) + 2
    print(" " * width + "".join(o.rjust(width) for o in OWNERS))
    for expected in OWNERS[:-1]:
        print(expected.ljust(width) + "".join(str(confusion[(expected, p)]).rjust(width) for p in OWNERS))
    if misses and (args.verbose or case_acc < 1.0):
        print("\ncase-id misses (sample: expected -> predicted [method])")
        for name, expected, got, method in misses:
            print(f"  {name}: {expected} -> {got} [{method}]")
    return 0 if owner_acc >= args.min_owner else 1


if __name__ == "__main__":
    sys.exit(main())
