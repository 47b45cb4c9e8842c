"""The lexical stage: BM25 over owner-carrying documents, turned into an owner vote with a margin.

Documents are every failure case's own text (title, cause, example) and each of its ``real_examples`` (verbatim
lines from the tuning half of the real-log corpus, with their source URL). The query is a root cause's evidence.
The top documents vote for an owner, weighted by score; the vote's ``margin`` is

    (w_best - w_second) / (w_best + w_second + SMOOTHING)

so a vote between near-equal owners, or one carried by a weak score, has a small margin. ``SMOOTHING`` is a fixed
prior in BM25 units, not fitted. Whether a margin is enough is decided by the calibration (classifier.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rank_bm25 import BM25Okapi

from msmigrate.knowledge.catalog import Catalog
from msmigrate.knowledge.retrieval import tokenize

TOP_DOCS = 5
SMOOTHING = 5.0


@dataclass(frozen=True)
class LexicalDoc:
    case_id: str
    owner: str
    text: str
    source: str | None = None  # corpus URL for a real example; None for the case's own text


@dataclass
class OwnerVote:
    owner: str
    case_id: str | None
    margin: float
    top_score: float
    candidates: list[dict[str, Any]] = field(default_factory=list)


def lexical_docs(catalog: Catalog) -> list[LexicalDoc]:
    docs = []
    for entry in sorted(catalog.failures(), key=lambda e: e.id):
        meta = entry.meta
        docs.append(LexicalDoc(entry.id, meta["owner"], "\n".join([entry.title, meta["cause"], meta["example"]])))
        for example in meta.get("real_examples", []):
            docs.append(LexicalDoc(entry.id, meta["owner"], example["text"], example["source"]))
    return docs


def _index(catalog: Catalog) -> tuple[BM25Okapi, list[LexicalDoc]]:
    key = "lexical-owner-index"
    if key not in catalog.derived:
        docs = lexical_docs(catalog)
        catalog.derived[key] = (BM25Okapi([tokenize(d.text) for d in docs]), docs)
    return catalog.derived[key]


def owner_vote(evidence: str, catalog: Catalog, exclude_source: str | None = None) -> OwnerVote | None:
    # each distinct word counts once: a line a log repeats (per rank, per retry) must not outweigh the rest of it
    tokens = list(dict.fromkeys(tokenize(evidence)))
    if not tokens:
        return None
    bm25, docs = _index(catalog)
    scored = [(float(s), d) for s, d in zip(bm25.get_scores(tokens), docs)
              if s > 0 and (exclude_source is None or d.source != exclude_source)]
    if not scored:
        return None
    scored.sort(key=lambda p: (-p[0], p[1].case_id))
    top = scored[:TOP_DOCS]
    weights: dict[str, float] = {}
    for score, doc in top:
        weights[doc.owner] = weights.get(doc.owner, 0.0) + score
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))
    best_owner, w_best = ranked[0]
    w_second = ranked[1][1] if len(ranked) > 1 else 0.0
    case_id = next(d.case_id for _, d in top if d.owner == best_owner)
    candidates = [{"case_id": d.case_id, "owner": d.owner, "score": round(s, 2)} for s, d in top]
    return OwnerVote(owner=best_owner, case_id=case_id, margin=round((w_best - w_second) / (w_best + w_second +
                     SMOOTHING), 4), top_score=round(top[0][0], 3), candidates=candidates)
