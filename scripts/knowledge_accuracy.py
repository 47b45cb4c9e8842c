"""Score the failure classifier: the in-sample labeled set and the real-log corpus (tuning and held-out halves).

Prints, for the labeled set (evals/labeled, written around catalog messages: in-sample) owner and
case-id accuracy, the method mix and the owner confusion matrix; for each half of the real-log corpus
(evals/real_logs: verbatim public failure excerpts, split by a hash of the source URL) owner accuracy
(an abstention counts as a miss; the held-out half is also scored per collection round),
precision when answering, abstention rate, confidently-wrong rate (a wrong owner
from the regex or lexical stage), the confusion matrix, and how many healthy logs were flagged as failures.
Rows = expected owner, columns = predicted; "none" = the classifier abstained (the LLM or the failed gate's phase
decides at run time). Exit code 1 if labeled-set owner accuracy < --min-owner.

    python scripts/knowledge_accuracy.py [--labeled DIR] [--corpus DIR] [--min-owner 0.9] [--bm25-only] [--verbose]
                                         [--llm-base-url URL --llm-model NAME] [--llm-answers FILE] [--llm-max N]

With --llm-base-url (any OpenAI-compatible endpoint), every corpus excerpt the classifier abstains on or answers only
tentatively (a regex hit among equal rivals or read from a condition, a lexical vote) is asked to the LLM exactly as
the classify node asks it (root cause, the deterministic answer with its confidence, candidate cases with how each
was found, owner semantics; one excerpt per request: the held-out half newest round first, then the tuning half;
every one unless --llm-max caps the requests), and the corpus
figures are printed again for the whole pipeline, twice from the same answers: with the LLM reviewing tentative
answers (its owner overrides, its "unknown" leaves the answer standing) and with the LLM on abstentions only; a
wrong LLM answer counts as confidently wrong (it would route the run); an LLM answer of owner "unknown" on an
abstention counts as an abstention (the run goes back to the failed gate's phase). With --llm-answers FILE every answer is
recorded there (owner, case, reason, and a hash of what the prompt was built from); given the file without an
endpoint, the recorded answers are replayed: an excerpt still abstaining gets its recorded answer when the prompt
inputs are unchanged, and is counted as asked-on-another-prompt (answer still used) or never-asked (abstention).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

from msmigrate.knowledge.classifier import classify
from msmigrate.knowledge.labeled_set import load_labeled
from msmigrate.knowledge.real_log_corpus import CORPUS_DIR, RealLog
from msmigrate.knowledge.real_log_corpus import load_corpus as _load_corpus

OWNERS = ["model", "data", "config", "environment", "none"]


@lru_cache(maxsize=None)
def load_corpus(split: str | None, folder: Path | None) -> tuple[RealLog, ...]:
    """The corpus, parsed once per run: every table below reads it again (a thousand YAML files)."""
    return tuple(_load_corpus(split, folder))


class Score:
    """Counts for one set of logs (a plain class: this script is also loaded by path, outside sys.modules)."""

    def __init__(self) -> None:
        self.total = self.correct = self.abstained = self.wrong = self.healthy = self.healthy_flagged = 0
        self.confusion: Counter = Counter()
        self.methods: Counter = Counter()
        self.misses: list[str] = []

    def add(self, name: str, expected: str | None, result) -> None:
        self.methods[result.method] += 1
        if expected is None:  # a healthy log
            self.healthy += 1
            if result.owner is not None:
                self.healthy_flagged += 1
                self.misses.append(f"{name}: healthy -> {result.case_id or result.owner} [{result.method}]")
            return
        predicted = result.owner or "none"
        self.total += 1
        self.confusion[(expected, predicted)] += 1
        if predicted == expected:
            self.correct += 1
            return
        if result.owner is None:
            self.abstained += 1
        else:
            self.wrong += 1
        self.misses.append(f"{name}: {expected} -> {predicted} ({result.case_id}) [{result.method}]")


def _pct(n: int, d: int) -> str:
    return f"{n / d:.1%} ({n}/{d})" if d else "n/a (0)"


def print_matrix(confusion: Counter) -> None:
    width = max(len(o) for o in OWNERS) + 2
    print(" " * width + "".join(o.rjust(width) for o in OWNERS))
    for expected in OWNERS[:-1]:
        print(expected.ljust(width) + "".join(str(confusion[(expected, p)]).rjust(width) for p in OWNERS))


class LLMStage:
    """The classify node's LLM fallback, outside a run: the same prompt, the same answer parsing. Answers are kept
    by excerpt name with a hash of the prompt inputs (``answers``), so a later run can replay them."""

    def __init__(self, base_url: str | None, model: str, answers: dict | None = None, max_requests: int | None = None,
                 timeout_s: float = 120.0, save_to: Path | None = None):
        self.policy = None
        self.save_to = save_to  # written after every new answer: a run stopped midway keeps what was asked
        if base_url:
            from msmigrate.agent.config import LLMSettings, Settings
            from msmigrate.agent.policies.llm import LLMPolicy, build_chat_model

            # a request is never retried: with a person or an agent behind the endpoint it would be asked twice
            llm = LLMSettings(base_url=base_url, model=model, max_transport_retries=0, timeout_s=timeout_s)
            self.policy = LLMPolicy(build_chat_model(llm, Settings()), llm)
        self.answers = answers if answers is not None else {}
        self.max_requests = max_requests
        self.asked = self.answered = self.replayed = self.stale = self.unasked = self.abstained = self.overrode = 0

    @staticmethod
    def prompt_key(log: str, evidence: dict) -> str:
        """What the prompt is built from (the excerpt it shows and the evidence), hashed: equal keys, equal prompt."""
        from msmigrate.agent.policies.llm import log_excerpt

        payload = json.dumps({"log": log_excerpt(log), "evidence": evidence}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]

    def __call__(self, name: str, log: str, result):
        from msmigrate.agent.nodes.classify import llm_evidence

        evidence = llm_evidence("unknown", result)
        key = self.prompt_key(log, evidence)
        recorded = self.answers.get(name)
        if recorded is None and self.policy is not None and \
                (self.max_requests is None or self.asked < self.max_requests):
            recorded = self._ask(name, log, evidence, key, result)
        if recorded is None:
            self.unasked += 1
            return result
        if recorded["prompt_key"] != key:
            self.stale += 1  # asked on another version of the prompt inputs: the answer is still the LLM's
        if recorded.get("owner") is None:  # the LLM said the evidence does not decide: as without it (an
            # abstention stays one, a tentative answer stands)
            self.abstained += recorded.get("method") == "llm-abstain"
            return result
        self.replayed += 1
        self.overrode += result.owner is not None and result.owner != recorded["owner"]
        result.owner, result.case_id, result.method = recorded["owner"], recorded.get("case_id"), "llm"
        return result

    def _ask(self, name: str, log: str, evidence: dict, key: str, result) -> dict:
        from msmigrate.agent.policies.base import PolicyView
        from msmigrate.core.run_context import RunContext

        ctx = RunContext(run_id="accuracy", run_dir=Path("."), source=Path("."), target=Path("."),
                         model_name="(corpus excerpt)")
        view = PolicyView(phase="classify", state={"attempts": {}, "gates": {}, "plan": {}}, messages=[], tools=[],
                          ctx=ctx)
        self.asked += 1
        opinion = self.policy.classify(log, view, evidence=evidence) or {}
        self.answered += bool(opinion)
        self.answers[name] = {"owner": opinion.get("owner"), "case_id": opinion.get("case_id"),
                              "method": opinion.get("method"),
                              "reason": opinion.get("diagnosis", "")[:600], "prompt_key": key,
                              "fits": opinion.get("fits") or [],  # the owners the LLM left possible
                              # what the deterministic stages had said: an abstention or a tentative owner
                              "asked_on": "tentative" if result.tentative else "abstention",
                              "deterministic_owner": result.owner}
        if self.save_to is not None:
            self.save()
        return self.answers[name]

    def save(self) -> None:
        text = json.dumps(self.answers, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        partial = self.save_to.with_name(self.save_to.name + ".tmp")
        partial.write_text(text, encoding="utf-8")
        partial.replace(self.save_to)  # atomic: a reader never sees half a file


def score_corpus(split: str | None, folder: Path | None, use_regex: bool, round_: int | None = None,
                 llm: LLMStage | None = None, review_tentative: bool = False,
                 names: set[str] | None = None) -> Score:
    """Score one half (optionally one round, or only the excerpts in ``names``). With ``llm``, the excerpts the
    classify node would ask about are asked (or replayed): every abstention, and with ``review_tentative`` every
    tentative answer too."""
    score = Score()
    entries = [e for e in load_corpus(split, folder) if names is None or e.name in names]
    if llm is not None:  # the newest round first: a request cap must not cut the clean (newest) held-out figure
        entries = sorted(entries, key=lambda e: -e.round)
    for entry in entries:
        if round_ is None or entry.round == round_:
            result = classify(entry.log, use_regex=use_regex)
            asked = result.method == "none" or (review_tentative and result.tentative)
            if llm is not None and asked and not entry.healthy:
                result = llm(entry.name, entry.log, result)
            score.add(entry.name, entry.owner, result)
    return score


def report_corpus(split: str, score: Score, verbose: bool) -> None:
    answered = score.total - score.abstained
    label = f"{split} half" if split in ("tuning", "heldout") else split
    print(f"\nreal-log corpus, {label}: {score.total} failure excerpts, {score.healthy} healthy logs")
    print(f"owner accuracy:         {_pct(score.correct, score.total)}")
    print(f"precision when answering: {_pct(score.correct, answered)}")
    print(f"abstention rate:        {_pct(score.abstained, score.total)}")
    print(f"confidently wrong rate: {_pct(score.wrong, score.total)}")
    print(f"healthy logs flagged:   {score.healthy_flagged} of {score.healthy}")
    print("methods: " + ", ".join(f"{m}={n}" for m, n in sorted(score.methods.items())))
    print_matrix(score.confusion)
    if verbose and score.misses:
        print("misses:")
        for miss in score.misses:
            print("  " + miss)


def report_llm_stage(args: argparse.Namespace) -> None:
    """The pipeline with the LLM stage, two ways from the same answers: the LLM reviewing tentative deterministic
    answers too (what the classify node does when REVIEW_TENTATIVE), and answering abstentions only."""
    answers = json.loads(args.llm_answers.read_text(encoding="utf-8")) if args.llm_answers and \
        args.llm_answers.exists() else {}
    llm = LLMStage(args.llm_base_url, args.llm_model, answers, args.llm_max, args.llm_timeout,
                   save_to=args.llm_answers)
    scores = {}
    try:  # held-out first: the request cap must not cut the figure that counts; the reviewing policy asks a superset
        for split in ("heldout", "tuning"):
            scores[split] = score_corpus(split, args.corpus, not args.bm25_only, llm=llm, review_tentative=True)
    finally:
        if args.llm_answers and llm.asked:
            llm.save()
    for split in ("tuning", "heldout"):
        report_corpus(f"{split}, with the LLM stage (reviewing tentative answers)", scores[split], args.verbose)
    print(f"\nLLM asked {llm.asked} times, answered {llm.answered}; recorded answers used {llm.replayed} "
          f"({llm.stale} asked on other prompt inputs; {llm.overrode} changed a tentative owner); abstentions never "
          f"asked {llm.unasked}; the LLM abstained (owner unknown) on {llm.abstained}")
    replay = LLMStage(None, args.llm_model, llm.answers)
    print("\nheld-out half with the LLM stage by collection round, reviewing tentative / abstentions only "
          "(owner accuracy, confidently wrong, abstained):")
    rounds = sorted({e.round for e in load_corpus("heldout", args.corpus)})
    for label, part in [(f"round {r}", r) for r in rounds] + [("all", None)]:
        line = f"  {label:>8}:"
        for review in (True, False):
            got = score_corpus("heldout", args.corpus, not args.bm25_only, round_=part, llm=replay,
                               review_tentative=review)
            line += f"  {_pct(got.correct, got.total):>15} {_pct(got.wrong, got.total):>14} " \
                    f"{_pct(got.abstained, got.total):>14} |"
        print(line.rstrip(" |"))
    for split in ("tuning", "heldout"):
        report_corpus(f"{split}, with the LLM stage (abstentions only: what the classify node asks)",
                      score_corpus(split, args.corpus, not args.bm25_only, llm=replay), args.verbose)
    report_audits(args.corpus, not args.bm25_only, replay)


def report_audits(folder: Path | None, use_regex: bool, llm: LLMStage | None) -> None:
    """Figures by decidability: each ``decidability_audit_*.json`` beside the corpus is a judge's verdict, per
    excerpt, on whether the excerpt alone decides its labelled owner (yes / partly / no). It tells how much of a miss
    is the classifier's and how much is an excerpt that does not carry its owner (a label from the thread's fix)."""
    together: dict[str, dict] = {}
    for path in sorted((folder or CORPUS_DIR).glob("decidability_audit_*.json")):
        audit = {k: v for k, v in json.loads(path.read_text(encoding="utf-8")).items() if not k.startswith("_")}
        together.update(audit)
        _report_audit(f"{path.name}: {len(audit)} excerpts judged", None, audit, folder, use_regex, llm)
    if together:  # every judged held-out excerpt at once: the figure the goal is about, where the excerpt decides
        _report_audit("every audit's held-out excerpts", "heldout", together, folder, use_regex, llm)
        heldout = {e.name for e in load_corpus("heldout", folder) if not e.healthy}
        print(excerpt_ceiling({name: said for name, said in together.items() if name in heldout}))


def excerpt_ceiling(audit: dict[str, dict]) -> str:
    """What the judged excerpts allow a classifier that reads only the excerpt: it can be right with no risk of a
    confident wrong answer only where the excerpt decides its owner, and right at all only where it also leans to it
    (an excerpt judged ``no`` points elsewhere or leaves the thread's choice open)."""
    verdicts = [said.get("decides") for said in audit.values()]
    yes, partly, total = verdicts.count("yes"), verdicts.count("partly"), len(verdicts)
    return (f"  what these {total} excerpts allow a classifier reading only the excerpt: decided by the excerpt "
            f"{_pct(yes, total)}; decided or leaning to the label {_pct(yes + partly, total)} (the most it could get "
            f"right, each leaning one with another owner still plausible)")


def _report_audit(title: str, split: str | None, audit: dict[str, dict], folder: Path | None, use_regex: bool,
                  llm: LLMStage | None) -> None:
    print(f"\nby decidability ({title}; owner accuracy, confidently wrong, abstained"
          f"{', with the LLM stage on abstentions' if llm is not None else ''}):")
    for verdict in ("yes", "partly", "no"):
        names = {name for name, said in audit.items() if said.get("decides") == verdict}
        got = score_corpus(split, folder, use_regex, llm=llm, names=names)  # split None: an audit may span both
        print(f"  decides {verdict:>6}: {got.total:3d} failures  {_pct(got.correct, got.total):>16}  "
              f"{_pct(got.wrong, got.total):>14}  {_pct(got.abstained, got.total):>16}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labeled", type=Path, default=None, help="folder of labeled logs (default: packaged set)")
    parser.add_argument("--corpus", type=Path, default=None, help="real-log corpus folder (default: packaged)")
    parser.add_argument("--min-owner", type=float, default=0.9, help="fail below this labeled-set owner accuracy")
    parser.add_argument("--bm25-only", action="store_true", help="skip the regex stage (measures the fallback)")
    parser.add_argument("--verbose", action="store_true", help="list every miss")
    parser.add_argument("--llm-base-url", default=None, help="OpenAI-compatible endpoint for the LLM stage")
    parser.add_argument("--llm-model", default="default", help="model name at that endpoint")
    parser.add_argument("--llm-answers", type=Path, default=None,
                        help="JSON file the LLM answers are recorded in; replayed when no endpoint is given")
    # no cap by default: a capped run left tuning abstentions unasked (round 8: 58), which understates the tuning
    # figure; the order (newest held-out round first, then the older held-out rounds, then tuning) keeps a cap given
    # here from cutting the clean figure
    parser.add_argument("--llm-max", type=int, default=None, help="most LLM requests in one run (default: no cap)")
    parser.add_argument("--llm-timeout", type=float, default=120.0, help="seconds one LLM request may take")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    use_regex = not args.bm25_only

    samples = load_labeled(args.labeled)
    labeled = Score()
    case_ok = 0
    case_misses = []
    for sample in samples:
        result = classify(sample.log, use_regex=use_regex)
        labeled.add(sample.name, sample.expected_owner, result)
        case_ok += result.case_id == sample.expected_case
        if result.case_id != sample.expected_case:
            case_misses.append(f"{sample.name}: {sample.expected_case} -> {result.case_id} [{result.method}]")
    total = len(samples)
    owner_acc = labeled.correct / total if total else 0.0
    print(f"labeled logs (in-sample): {total}" + (" (regex stage disabled)" if args.bm25_only else ""))
    print(f"owner-phase accuracy: {_pct(labeled.correct, total)}")
    print(f"case-id accuracy:     {_pct(case_ok, total)}")
    print("methods: " + ", ".join(f"{m}={n}" for m, n in sorted(labeled.methods.items())))
    print("\nowner confusion matrix (rows expected, columns predicted)")
    print_matrix(labeled.confusion)
    if case_misses and (args.verbose or case_ok < total):
        print("case-id misses (sample: expected -> predicted [method])")
        for miss in case_misses:
            print("  " + miss)

    if args.labeled is None or args.corpus is not None:
        for split in ("tuning", "heldout"):
            report_corpus(split, score_corpus(split, args.corpus, use_regex), args.verbose)
        # per collection round, the held-out half alone: round 4 was labelled and committed before any of it was
        # scored, and its tuning half was the last the catalog and the calibration were extended from
        print("\nheld-out half by collection round (owner accuracy / confidently wrong / abstained):")
        for round_ in sorted({e.round for e in load_corpus("heldout", args.corpus)}):
            part = score_corpus("heldout", args.corpus, use_regex, round_=round_)
            if part.total:
                print(f"  round {round_}: {part.total:3d} failures  {_pct(part.correct, part.total):>16}  "
                      f"{_pct(part.wrong, part.total):>14}  {_pct(part.abstained, part.total):>16}  "
                      f"healthy flagged {part.healthy_flagged} of {part.healthy}")
        if args.llm_base_url or args.llm_answers:
            report_llm_stage(args)
        else:
            report_audits(args.corpus, use_regex, None)
    return 0 if owner_acc >= args.min_owner else 1


if __name__ == "__main__":
    sys.exit(main())
