"""Map a failure (log text and/or validator finding codes) to a failure case and its owner phase.

Order, deterministic first:
1. **regex** — every pattern of every failure case is searched in the log; among the cases that match, the one with
   the highest ``priority`` wins, ties broken by the longer matching pattern (more specific), then by id. Priorities
   encode "root cause beats wrapper": torchrun's ``ChildFailedError`` is priority 5, a specific message 70-90.
   Validator finding codes are resolved in the same deterministic stage (reported as ``method="regex"``) when the
   log matched nothing: a code naming one case directly (FINDING_CODE_CASES) picks it; otherwise the code is mapped
   to the canonical vocabulary (FINDING_CODE_ALIASES) and the most general case listing it (lowest priority) wins.
2. **bm25** — rank-bm25 over each case's title, cause, fix and example against the error-looking lines of the log.
   Accepted only when the best score clears an absolute floor and beats the runner-up by a margin. When the regex
   stage only found a wrapper-level case (priority <= GENERIC_PRIORITY: torchrun ChildFailedError, launch timeout),
   finding codes and a confident BM25 hit on the non-wrapper lines are preferred, else the wrapper case is returned;
3. **none** — nothing is close; the agent falls back to the LLM (classify node) with the raw excerpt.

The thresholds were calibrated on ``knowledge/labeled`` (see scripts/knowledge_accuracy.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal

from msmigrate.knowledge.catalog import (FINDING_CODE_CASES, Catalog, KnowledgeEntry, canonical_finding_code,
                                         load_catalog)
from msmigrate.knowledge.retrieval import bm25_index, tokenize

Method = Literal["regex", "bm25", "none"]

TAIL_CHARS = 60_000  # only the end of a huge log matters; the root cause is printed before the wrapper noise
GENERIC_PRIORITY = 20  # wrapper-level cases (torchrun ChildFailedError, launch timeout): a better answer may exist
BM25_MIN_SCORE = 12.0
BM25_MIN_MARGIN = 1.15  # best / runner-up
_ERRORISH = re.compile(
    r"(?i)(error|exception|failed|failure|not found|no module|cannot|can't|unable|invalid|does not|"
    r"timed? ?out|killed|nan\b|inf\b|refused|missing|not registered|not implemented|hang)"
)


# torchrun / elastic wrapper boilerplate: says "a rank failed", never why, so it is kept out of the BM25 query.
_WRAPPER_NOISE = re.compile(
    r"(torch/distributed/elastic|ChildFailedError|Root Cause|<NO_OTHER_FAILURES>|^\s*Failures:|"
    r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:|^[=-]{10,}$|sys\.exit\(main\(\)\)|run\(args\)|"
    r"/bin/torchrun|distributed/run\.py|FAILED$|^Traceback \(most recent call last\):$)"
)


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id, "owner": self.owner, "confidence": self.confidence, "method": self.method,
            "diagnosis": self.diagnosis, "autofix": self.autofix, "matched": self.matched, "excerpt": self.excerpt,
            "candidates": self.candidates,
        }


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
            candidates: list[dict[str, Any]]) -> Classification:
    return Classification(case_id=entry.id, owner=entry.meta["owner"], confidence=round(confidence, 3),
                          method=method, diagnosis=_diagnosis(entry), autofix=_autofix(entry), matched=matched,
                          excerpt=excerpt, candidates=candidates)


def match_regex(log_text: str, catalog: Catalog) -> list[tuple[KnowledgeEntry, re.Pattern[str], re.Match[str]]]:
    """All (case, pattern, match) hits, best first by (priority, pattern length, id)."""
    hits = []
    for entry, patterns in _compiled(catalog):
        best = None
        for pattern in patterns:
            found = pattern.search(log_text)
            if found and (best is None or len(pattern.pattern) > len(best[0].pattern)):
                best = (pattern, found)
        if best:
            hits.append((entry, best[0], best[1]))
    hits.sort(key=lambda h: (-int(h[0].meta.get("priority", 50)), -len(h[1].pattern), h[0].id))
    return hits


def error_lines(log_text: str, limit: int = 60, keep_wrapper: bool = True) -> str:
    """The error-looking lines of a log (or its last lines when none look like errors), for BM25 and excerpts.
    torchrun wrapper lines are dropped; if nothing else is left they are kept unless ``keep_wrapper`` is False."""
    lines = [line for line in log_text.splitlines() if line.strip() and not _WRAPPER_NOISE.search(line)]
    if not lines and keep_wrapper:  # nothing but wrapper output: let BM25 see it so the wrapper case can be named
        lines = [line for line in log_text.splitlines() if line.strip()]
    picked = [line for line in lines if _ERRORISH.search(line)]
    return "\n".join((picked or lines)[-limit:])


def classify(log_text: str = "", finding_codes: Iterable[str] = (), catalog: Catalog | None = None,
             use_regex: bool = True) -> Classification:
    """Classify a failure; ``use_regex=False`` skips the deterministic stage (used to measure BM25 on its own)."""
    catalog = catalog or load_catalog()
    text = (log_text or "")[-TAIL_CHARS:]
    codes = [c for c in finding_codes if c]

    hits = match_regex(text, catalog) if text and use_regex else []
    generic: Classification | None = None
    if hits:
        entry, pattern, found = hits[0]
        candidates = [{"case_id": e.id, "priority": e.meta.get("priority", 50)} for e, _, _ in hits[:5]]
        clear_winner = len(hits) == 1 or hits[1][0].meta.get("priority", 50) < entry.meta.get("priority", 50)
        result = _result(entry, 0.95 if clear_winner else 0.85, "regex", pattern.pattern,
                         _excerpt_around(text, found.start(), found.end()), candidates)
        if int(entry.meta.get("priority", 50)) > GENERIC_PRIORITY:
            return result
        generic = result  # only a wrapper/timeout matched: a finding code or a confident BM25 hit says more

    for code in codes if use_regex else ():
        direct = catalog.get(FINDING_CODE_CASES.get(code, ""))
        if direct is not None:
            return _result(direct, 0.9, "regex", f"finding:{code}", f"validator finding {code}",
                           [{"case_id": direct.id, "priority": direct.meta.get("priority", 50)}])
        canonical = canonical_finding_code(code)
        explaining = [e for e in catalog.failures() if canonical in e.meta["finding_codes"]]
        if explaining:
            entry = min(explaining, key=lambda e: (int(e.meta.get("priority", 50)), e.id))
            candidates = [{"case_id": e.id, "priority": e.meta.get("priority", 50)} for e in explaining]
            return _result(entry, 0.9, "regex", f"finding:{code}", f"validator finding {code}", candidates)

    query = error_lines(text, keep_wrapper=generic is None)
    tokens = tokenize(query)
    if not tokens:
        return generic or Classification(None, None, 0.0, "none", "Empty log and no finding codes.", excerpt="")
    bm25, entries = bm25_index(catalog, ("failure",))
    scored = sorted(zip(bm25.get_scores(tokens), entries), key=lambda p: (-p[0], p[1].id))
    best_score, best = scored[0]
    runner_up = scored[1][0] if len(scored) > 1 else 0.0
    candidates = [{"case_id": e.id, "score": round(float(s), 2)} for s, e in scored[:5]]
    margin = best_score / runner_up if runner_up > 0 else float("inf")
    if best_score >= BM25_MIN_SCORE and margin >= BM25_MIN_MARGIN:
        confidence = min(0.75, 0.4 + (margin - 1.0) / 3)  # a clear winner (margin >= 2) caps at 0.75
        return _result(best, confidence, "bm25", None, query[-1500:], candidates)
    return generic or Classification(None, None, 0.0, "none",
                                     "No failure case is close enough; needs LLM diagnosis of the excerpt.",
                                     excerpt=query[-1500:], candidates=candidates)
