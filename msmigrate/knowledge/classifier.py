"""Map a failure (log text and/or validator finding codes) to a failure case and its owner phase — or abstain.

Order, deterministic first, always on the extracted root cause (:mod:`msmigrate.knowledge.root_cause`), never on
the raw log, so INFO/WARNING lines of a run cannot decide a class:

1. **regex** — every pattern of every failure case is searched in the root-cause *evidence* (the failure lines of
   the failing rank plus the decisive traceback's last frames). Among matching cases the highest ``priority`` wins,
   ties broken by the longer pattern, then by id ("root cause beats wrapper": torchrun's ``ChildFailedError`` is
   priority 5, specific messages 60-90); a wrapper case is named only when the log shows nothing but the wrapper.
   A case whose message the tuning half shows owned by more than one phase (its regex hits there agree with the
   label less often than the calibration's precision target, ``calibration.json: regex_cases``) is *not decisive*:
   the match becomes the first candidate of an "unknown" verdict, so the LLM (or the failed gate's phase) decides.
   A plain line (no level, no exception class) that states a specific case's message is a failure line too
   (``known_message``, :func:`known_message_lines`), looked for only when the extractor found no other signal.
   Only when the log holds no failure signal at all (a gate that failed on a condition rather than an error: a
   zero loss, a dropped-sample warning, a timeout note) are the non-INFO lines searched, warnings included, and
   then only by cases marked ``condition: true``. Validator finding codes are resolved in the same stage
   (``method="regex"``).
2. **bm25** — BM25 over documents that each carry an owner: the cases' own texts and their ``real_examples``
   (tuning half of the real-log corpus only). The query is the evidence. The top documents vote for an owner; the
   vote is accepted only when its margin clears the threshold calibrated on the tuning half
   (``calibration.json``, written by ``scripts/calibrate_classifier.py``); the reported confidence is the precision
   the calibration measured above that margin.
3. **none** — "unknown": nothing reliable. The classify node then asks the LLM (when the run has one) with the root
   cause, the top candidates and the owner semantics, or sends the failure back to the phase whose gate failed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Literal

from msmigrate.knowledge.catalog import (FINDING_CODE_CASES, Catalog, KnowledgeEntry, canonical_finding_code,
                                         load_catalog)
from msmigrate.knowledge.lexical import OwnerVote, owner_vote
from msmigrate.knowledge.library_facts import check_fact, unplaced_key_hints
from msmigrate.knowledge.root_cause import (RootCause, extract, line_level, strip_prefixes, with_gate_verdict,
                                            with_signals)

Method = Literal["regex", "bm25", "none"]

TAIL_CHARS = 60_000  # only the end of a huge log matters; the root cause is printed before the wrapper noise
GENERIC_PRIORITY = 20  # wrapper-level cases (torchrun ChildFailedError, launch timeout): a better answer may exist
# Below this confidence an answer is *tentative*: a regex hit among equal-priority rivals, or read from a condition
# rather than an error line, or a lexical vote. The classify node may let the LLM review a tentative answer; a
# regex hit on a failure line with no equal rival (0.95) is decisive and never reviewed.
DECISIVE_CONFIDENCE = 0.9
CALIBRATION_FILE = Path(__file__).resolve().parent / "calibration.json"
_INFO_LINE = re.compile(r"^\s*(?:\[?\d{4}-\d\d-\d\d[ T][\d:,.]+\]?\s*)?\[?(?:INFO|DEBUG)\b|NCCL INFO|HCCL INFO|"
                        r"^\[Rank \d+ \| Local Rank \d+\] [\d\-: ,]+ (?:INFO|DEBUG) |\bINFO\]")


# INFO lines that carry a gate's evidence: per-iteration metrics (a loss-shaped failure) and the framework's note
# that a YAML key matched no argument field (it registers it dynamically, i.e. ignores it)
_METRIC_LINE = re.compile(r"\biteration\s+\d+\s*/\s*\d+ \|.*\bloss: |Automatically registered YAML field: ")


@dataclass
class Classification:
    case_id: str | None
    owner: str | None
    confidence: float
    method: Method
    diagnosis: str
    autofix: list[dict[str, Any]] | None = None
    matched: str | None = None  # the regex (or finding code) that decided; None for bm25/none
    excerpt: str = ""
    candidates: list[dict[str, Any]] = field(default_factory=list)
    root_cause: dict[str, Any] = field(default_factory=dict)
    # the lexical owner vote when one was taken: owner, margin, and the margin the calibration accepts (None: never)
    vote: dict[str, Any] = field(default_factory=dict)

    @property
    def tentative(self) -> bool:
        """An answer the deterministic stages give without being sure of it (see DECISIVE_CONFIDENCE)."""
        return self.owner is not None and self.method in ("regex", "bm25") and \
            self.confidence < DECISIVE_CONFIDENCE

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id, "owner": self.owner, "confidence": self.confidence, "method": self.method,
            "diagnosis": self.diagnosis, "autofix": self.autofix, "matched": self.matched, "excerpt": self.excerpt,
            "candidates": self.candidates, "root_cause": self.root_cause, "vote": self.vote,
        }


@lru_cache(maxsize=4)
def load_calibration(path: str = str(CALIBRATION_FILE)) -> dict[str, Any]:
    """The lexical stage's acceptance rule; without a calibration file the stage never accepts."""
    file = Path(path)
    return json.loads(file.read_text(encoding="utf-8")) if file.exists() else {"min_margin": None, "bins": []}


def _compiled(catalog: Catalog) -> list[tuple[KnowledgeEntry, list[re.Pattern[str]]]]:
    key = "compiled-patterns"
    if key not in catalog.derived:
        catalog.derived[key] = [(e, [re.compile(p) for p in e.meta["patterns"]]) for e in catalog.failures()]
    return catalog.derived[key]


def _autofix(entry: KnowledgeEntry) -> list[dict[str, Any]] | None:
    value = entry.meta.get("autofix")
    if value is None:
        return None
    return [dict(a) for a in (value if isinstance(value, list) else [value])]


def _diagnosis(entry: KnowledgeEntry) -> str:
    return f"{entry.title}. Cause: {entry.meta['cause']} Fix: {entry.meta['fix']}"


def _excerpt_around(text: str, start: int, end: int, width: int = 400) -> str:
    return text[max(0, start - width // 2): min(len(text), end + width // 2)].strip()


def _result(entry: KnowledgeEntry, confidence: float, method: Method, matched: str | None, excerpt: str,
            candidates: list[dict[str, Any]], root: RootCause) -> Classification:
    return Classification(case_id=entry.id, owner=entry.meta["owner"], confidence=round(confidence, 3),
                          method=method, diagnosis=_diagnosis(entry), autofix=_autofix(entry), matched=matched,
                          excerpt=excerpt, candidates=candidates, root_cause=root.to_dict())


def match_regex(text: str, catalog: Catalog) -> list[tuple[KnowledgeEntry, re.Pattern[str], re.Match[str]]]:
    """All (case, pattern, match) hits in ``text``, best first by (priority, pattern length, id)."""
    hits = []
    for entry, patterns in _compiled(catalog):
        best = None
        for pattern in patterns:
            found = pattern.search(text)
            if found and (best is None or len(pattern.pattern) > len(best[0].pattern)):
                best = (pattern, found)
        if best:
            hits.append((entry, best[0], best[1]))
    hits.sort(key=lambda h: (-int(h[0].meta.get("priority", 50)), -len(h[1].pattern), h[0].id))
    return hits


def quiet_lines(log_text: str) -> str:
    """The log without INFO/DEBUG lines and without launcher prefixes: what a signal-less failure is read from."""
    kept = []
    for raw in log_text.splitlines():
        line, _ = strip_prefixes(raw)
        if line.strip() and (not _INFO_LINE.search(line) or _METRIC_LINE.search(line)):
            kept.append(line)
    return "\n".join(kept)


KNOWN_MESSAGE_LINES = 5


def known_message_lines(log_text: str, catalog: Catalog) -> list[str]:
    """Plain lines (no INFO/WARNING level, no exception class the extractor reads) that state a specific failure
    case's message: a library's one-line complaint printed without a class or a level ("X does not support
    `device_map='auto'`"). Wrapper-level and condition cases are left out: their words occur in healthy runs."""
    specific = [(e, ps) for e, ps in _compiled(catalog)
                if int(e.meta.get("priority", 50)) > GENERIC_PRIORITY and not e.meta.get("condition")]
    found = []
    for line in quiet_lines(log_text).splitlines():
        if line_level(line) is None and any(p.search(line) for _, ps in specific for p in ps):
            found.append(line.strip()[:800])
            if len(found) == KNOWN_MESSAGE_LINES:
                break
    return found


def error_lines(log_text: str, limit: int = 60) -> str:
    """The failure lines of a log (its root-cause evidence), for excerpts."""
    return "\n".join(extract(log_text).evidence.splitlines()[-limit:])


def _from_codes(codes: list[str], catalog: Catalog, root: RootCause) -> Classification | None:
    for code in codes:
        direct = catalog.get(FINDING_CODE_CASES.get(code, ""))
        if direct is not None:
            return _result(direct, 0.9, "regex", f"finding:{code}", f"validator finding {code}",
                           [{"case_id": direct.id, "priority": direct.meta.get("priority", 50)}], root)
        canonical = canonical_finding_code(code)
        explaining = [e for e in catalog.failures() if canonical in e.meta["finding_codes"]]
        if explaining:
            entry = min(explaining, key=lambda e: (int(e.meta.get("priority", 50)), e.id))
            candidates = [{"case_id": e.id, "priority": e.meta.get("priority", 50)} for e in explaining]
            return _result(entry, 0.9, "regex", f"finding:{code}", f"validator finding {code}", candidates, root)
    return None


_FINDING_LINE = re.compile(r"^\s*\[([a-z0-9-]+)\] ")


def _finding_code_of_line(text: str, found: re.Match[str]) -> str | None:
    """The validator finding code a gate's problem line starts with (``[code] path: message``), for the line a
    match is on; None for any other line."""
    start = text.rfind("\n", 0, found.start()) + 1
    head = _FINDING_LINE.match(text[start:found.end()])
    return head.group(1) if head else None


def _explains(entry: KnowledgeEntry, codes: list[str]) -> bool:
    """Whether a case explains one of the validator's finding codes (then its message match is the finer answer)."""
    return any(FINDING_CODE_CASES.get(code) == entry.id or canonical_finding_code(code) in entry.meta["finding_codes"]
               for code in codes)


_FRAME_LINE = re.compile(r'^\s*File "[^"]+", line \d+')


def lexical(evidence: str, catalog: Catalog, exclude_source: str | None = None) -> OwnerVote | None:
    """The BM25 owner vote for ``evidence`` (``exclude_source`` leaves one corpus source out, for calibration).
    Traceback frame lines are left out of the query when anything else is there: their paths (site-packages,
    python3.x, torch/nn/modules) are words of every traceback and pulled the vote and the candidates shown to the LLM
    towards environment cases (tuning half: the top candidate's owner matched the label in 50 of 104 abstentions
    with the frames, 58 of 104 without)."""
    message = "\n".join(line for line in evidence.splitlines() if not _FRAME_LINE.search(line))
    return owner_vote(message if message.strip() else evidence, catalog, exclude_source=exclude_source)


def ambiguous_cases(calibration: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Cases whose regex hits on the tuning half disagreed with the owner label too often to be trusted alone: as
    the calibration decided (``decisive``: its hits show the case below the precision target,
    scripts/calibrate_classifier.py), else (an older calibration file) any share below the target."""
    target = calibration.get("target", 0.9)
    return {case: rec for case, rec in calibration.get("regex_cases", {}).items()
            if rec["agree"] < rec["hits"] and not rec.get("decisive", rec["agree"] / rec["hits"] >= target)}


def accept_vote(vote: OwnerVote | None, calibration: dict[str, Any]) -> float | None:
    """The calibrated confidence of a vote, or None when the calibration does not let the stage accept it."""
    threshold = calibration.get("min_margin")
    if vote is None or threshold is None or vote.margin < threshold:
        return None
    precision = [b["precision"] for b in calibration.get("bins", []) if vote.margin >= b["margin"]]
    return precision[-1] if precision else calibration.get("precision", 0.0)


def classify(log_text: str = "", finding_codes: Iterable[str] = (), catalog: Catalog | None = None,
             use_regex: bool = True, calibration: dict[str, Any] | None = None,
             exclude_source: str | None = None, gate_verdict: Iterable[str] = ()) -> Classification:
    """Classify a failure. ``gate_verdict``: the failed gate's own problem lines (evidence from code, not from the
    run's output). ``use_regex=False`` skips the deterministic stage (measures the lexical stage alone);
    ``calibration`` overrides the calibrated acceptance rule; ``exclude_source`` is for leave-one-out scoring."""
    catalog = catalog or load_catalog()
    calibration = load_calibration() if calibration is None else calibration
    text = (log_text or "")[-TAIL_CHARS:]
    codes = [c for c in finding_codes if c]
    gate_lines = [line for line in gate_verdict if line and line.strip()]
    root = with_gate_verdict(extract(text), gate_lines)
    if not root.failed and use_regex:  # no rule of the extractor fired: a plain line may still state a known failure
        root = with_signals(root, "known_message", known_message_lines(text, catalog))
    # failure lines when the log has any; otherwise (the gate failed on a condition) the log minus INFO lines
    searched = root.evidence if root.failed else quiet_lines(text)

    hits = match_regex(searched, catalog) if searched and use_regex else []
    if not root.failed:  # no error in the log: only cases detected from a condition (``condition: true``) and the
        # wrapper-level cases may match
        hits = [h for h in hits if h[0].meta.get("condition") or int(h[0].meta.get("priority", 50)) <= GENERIC_PRIORITY]
    hits, checked, untold = _checked_facts(hits, searched)
    said = [*checked.values(), *unplaced_key_hints(root.evidence)] if root.failed else list(checked.values())
    if said:  # what the installed libraries said, for the diagnosis and for the LLM when it is asked
        root.facts = list(dict.fromkeys(said))
    generic: Classification | None = None
    ambiguous: Classification | None = None
    coded = _from_codes(codes, catalog, root) if use_regex else None
    line_code = _finding_code_of_line(searched, hits[0][2]) if hits else None
    if line_code in codes and not _explains(hits[0][0], [line_code]):
        # the message matched the validator's own finding line, and that line's exact code names another case: the
        # code outranks the pattern (a `dataset_type` that is not registered is not a `model_id` that is not
        # registered because both lines say "not registered")
        return _from_codes([line_code], catalog, root) or coded
    if hits:
        entry, pattern, found = hits[0]
        candidates = [{"case_id": e.id, "priority": e.meta.get("priority", 50), "stage": "regex"}
                      for e, _, _ in hits[:5]]
        clear_winner = len(hits) == 1 or hits[1][0].meta.get("priority", 50) < entry.meta.get("priority", 50)
        confidence = (0.95 if clear_winner else 0.85) * (1.0 if root.failed else 0.75)
        result = _result(entry, confidence, "regex", pattern.pattern,
                         _excerpt_around(searched, found.start(), found.end()), candidates, root)
        if entry.id in checked:
            result.diagnosis = f"Checked in the installed libraries: {checked[entry.id]}. {result.diagnosis}"
        # the tuning corpus measures how a message in other people's logs maps to owners; the failed gate's own
        # verdict is msmigrate's check, which names what it checked (the collator's batch key, the tensor), so a
        # case matched there is decided by it, not by that measurement
        from_gate = any(pattern.search(line) for line in gate_lines)
        record = None if from_gate else ambiguous_cases(calibration).get(entry.id)
        if entry.id in untold:  # the case holds only with a fact the installed libraries could not tell
            ambiguous = Classification(
                None, None, 0.0, "none",
                f"The log matches {entry.id} ({entry.title}), which only a fact of the installed libraries "
                f"({entry.meta['fact']}) decides, and it cannot be checked here: unknown.", matched=pattern.pattern,
                excerpt=result.excerpt, candidates=candidates, root_cause=root.to_dict())
        elif record is not None:  # a known message, but not one that says who must fix it
            candidates[0].update(tuning_agree=record["agree"], tuning_hits=record["hits"])
            ambiguous = Classification(
                None, None, 0.0, "none",
                f"The log matches {entry.id} ({entry.title}), but that message was owned by {entry.meta['owner']} "
                f"in only {record['agree']} of {record['hits']} real cases of the tuning corpus: not decisive, "
                f"unknown.", matched=pattern.pattern, excerpt=result.excerpt, candidates=candidates,
                root_cause=root.to_dict())
        elif int(entry.meta.get("priority", 50)) > GENERIC_PRIORITY:
            return result
        # only a wrapper/timeout matched: a finding code or an accepted lexical vote says more; and when the log
        # shows a real root cause that nothing explains, naming the wrapper would be a confident guess: unknown
        generic = None if any(not s.wrapper for s in root.signals) else result

    if coded is not None:
        return coded

    if not root.failed:
        if generic or ambiguous:
            return generic or ambiguous
        # only wrapper lines (a rank died, not why) or nothing at all: no answer, but the LLM still gets the cases
        # whose messages match a line, and the lexical neighbours of the wrapper lines
        vote = lexical(root.evidence, catalog, exclude_source) if root.signals else None
        return Classification(None, None, 0.0, "none",
                              "No failure signal in the log (only INFO/WARNING lines or a launcher's summary) and "
                              "no case matched.", excerpt=searched[-1500:], root_cause=root.to_dict(),
                              candidates=_with_line_matches([{**c, "stage": "bm25"} for c in vote.candidates]
                                                            if vote else [], text, root, catalog))
    vote = lexical(root.cause, catalog, exclude_source)
    candidates = [{**c, "stage": "bm25"} for c in vote.candidates] if vote else []
    if ambiguous is not None:  # the matched case first, then the lexical neighbours, for the LLM to weigh
        ambiguous.candidates = ambiguous.candidates[:1] + [c for c in candidates if c.get("case_id") !=
                                                           ambiguous.candidates[0]["case_id"]]
    confidence = accept_vote(vote, calibration)
    result = _lexical_result(vote, confidence, catalog, candidates, root) or generic or ambiguous or \
        Classification(None, None, 0.0, "none", "No failure case is close enough: unknown (needs the LLM or the "
                       "failed gate's phase).", excerpt=root.evidence[-1500:], candidates=candidates,
                       root_cause=root.to_dict())
    if result.method == "none":
        result.candidates = _with_line_matches(result.candidates, text, root, catalog)
    if vote is not None:
        result.vote = {"owner": vote.owner, "margin": vote.margin, "accepted_from": calibration.get("min_margin")}
    return result


def _checked_facts(hits: list[tuple[KnowledgeEntry, re.Pattern[str], re.Match[str]]], searched: str
                   ) -> tuple[list[tuple[KnowledgeEntry, re.Pattern[str], re.Match[str]]], dict[str, str], set[str]]:
    """Hits of cases tied to a library fact (frontmatter ``fact``, :mod:`msmigrate.knowledge.library_facts`):
    dropped when the fact does not hold, kept with what was checked when it does, kept as undecidable (``untold``)
    when the installed libraries cannot tell. Returns (hits, case id -> what was checked, untold case ids)."""
    kept, checked, untold = [], {}, set()
    for hit in hits:
        fact = hit[0].meta.get("fact")
        if fact is None:
            kept.append(hit)
            continue
        holds, said = check_fact(fact, searched)
        if said:
            checked[hit[0].id] = said
        if holds is False:
            continue
        if holds is None:
            untold.add(hit[0].id)
        kept.append(hit)
    return kept, checked, untold


def _with_line_matches(candidates: list[dict[str, Any]], text: str, root: RootCause,
                      catalog: Catalog) -> list[dict[str, Any]]:
    """An abstention's candidates: every case whose message pattern matches one of the extracted failure lines or
    any non-INFO line of the log (wrapper cases last), then the lexical neighbours. A message match is evidence
    the LLM should see even when it did not decide (a wrapper's case, a not-decisive message, a line the extractor
    did not pick)."""
    seen = {c.get("case_id") for c in candidates if c.get("stage") == "regex"}
    matched = []
    for searched, outside in ((root.evidence, False), (quiet_lines(text), True)):
        for entry, pattern, _ in _checked_facts(match_regex(searched, catalog), searched)[0]:
            if entry.id not in seen:
                seen.add(entry.id)
                match = {"case_id": entry.id, "priority": entry.meta.get("priority", 50), "stage": "regex"}
                if outside:  # found only in a line the extractor did not take for a failure line (a warning, a
                    # note): the LLM is told it decided nothing
                    match["outside_failure_lines"] = True
                matched.append(match)
    matched.sort(key=lambda c: int(c["priority"]) <= GENERIC_PRIORITY)  # wrapper-level cases after specific ones
    regex_first = [c for c in candidates if c.get("stage") == "regex"]
    rest = [c for c in candidates if c.get("stage") != "regex" and c.get("case_id") not in seen]
    return regex_first + matched + rest


def _lexical_result(vote: OwnerVote | None, confidence: float | None, catalog: Catalog,
                    candidates: list[dict[str, Any]], root: RootCause) -> Classification | None:
    """The answer of an accepted lexical vote (its case when the top case agrees with the owner), else None."""
    if vote is None or confidence is None:
        return None
    entry = catalog.get(vote.case_id) if vote.case_id else None
    if entry is not None and entry.meta["owner"] == vote.owner:
        return _result(entry, confidence, "bm25", None, root.evidence[-1500:], candidates, root)
    return Classification(None, vote.owner, round(confidence, 3), "bm25",
                          f"Lexically closest to failures owned by {vote.owner}; no single case.",
                          excerpt=root.evidence[-1500:], candidates=candidates, root_cause=root.to_dict())
