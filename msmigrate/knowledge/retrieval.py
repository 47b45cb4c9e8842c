"""On-demand access to knowledge bodies: ``read_knowledge`` (by id) and ``search_knowledge`` (BM25 over entries).

Both are pure cores returning :class:`~msmigrate.core.tool_result.ToolResult`; ``read_knowledge_tool`` /
``search_knowledge_tool`` wrap them as LangChain tools with described pydantic argument schemas.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field
from rank_bm25 import BM25Okapi

from msmigrate.knowledge.catalog import Catalog, KnowledgeEntry, load_catalog
from msmigrate.core.tool_result import ToolResult, make_tool

MAX_BODY_CHARS = 8000
_TOKEN = re.compile(r"[a-z0-9_]+")


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens; identifiers with underscores are kept whole *and* split, so both forms match."""
    tokens: list[str] = []
    for token in _TOKEN.findall(text.lower()):
        if len(token) < 2:
            continue
        tokens.append(token)
        if "_" in token:
            tokens.extend(part for part in token.split("_") if len(part) >= 2)
    return tokens


def _entry_text(entry: KnowledgeEntry) -> str:
    meta = entry.meta
    parts = [entry.title, entry.description]
    for key in ("cause", "fix", "example", "model_id", "template", "collator", "dataset_type", "quirks", "modality"):
        value = meta.get(key)
        if value:
            parts.append(str(value))
    return "\n".join(parts)


def read_knowledge(entry_id: str, catalog: Catalog | None = None) -> ToolResult:
    """Body and structured fields of one knowledge entry."""
    catalog = catalog or load_catalog()
    entry = catalog.get(entry_id.strip())
    if entry is None:
        close = [e.id for e in catalog.entries.values() if entry_id.strip().lower() in e.id][:8]
        return ToolResult.failure(f"no knowledge entry with id {entry_id!r}", similar_ids=close)
    body = entry.body()
    truncated = len(body) > MAX_BODY_CHARS
    fields = {k: v for k, v in entry.meta.items() if k not in ("id", "title")}
    return ToolResult.success(id=entry.id, kind=entry.kind, title=entry.title, fields=fields,
                              body=body[:MAX_BODY_CHARS], truncated=truncated)


def bm25_index(catalog: Catalog, kinds: tuple[str, ...]) -> tuple[BM25Okapi, list[KnowledgeEntry]]:
    """BM25 over the entries of ``kinds`` (sorted by id), built once per catalog."""
    key = ("bm25", kinds)
    if key not in catalog.derived:
        entries = sorted((e for e in catalog.entries.values() if e.kind in kinds), key=lambda e: e.id)
        catalog.derived[key] = (BM25Okapi([tokenize(_entry_text(e)) for e in entries]), entries)
    return catalog.derived[key]


def search_knowledge(query: str, kind: str | None = None, k: int = 5, catalog: Catalog | None = None) -> ToolResult:
    """Rank entries by BM25 against ``query``; returns ids, kinds, titles and scores (bodies via read_knowledge)."""
    catalog = catalog or load_catalog()
    kinds = (kind,) if kind else ("doc", "case", "failure")
    if kind and kind not in ("doc", "case", "failure"):
        return ToolResult.failure(f"kind must be doc, case or failure, got {kind!r}")
    tokens = tokenize(query)
    if not tokens:
        return ToolResult.failure("query has no searchable words")
    bm25, entries = bm25_index(catalog, kinds)
    scores = bm25.get_scores(tokens)
    ranked = sorted(zip(scores, entries), key=lambda pair: (-pair[0], pair[1].id))[: max(1, k)]
    hits = [{"id": e.id, "kind": e.kind, "title": e.title, "score": round(float(s), 3)} for s, e in ranked if s > 0]
    return ToolResult.success(query=query, hits=hits)


class ReadKnowledgeArgs(BaseModel):
    entry_id: str = Field(description="Id of a knowledge entry exactly as listed in the knowledge index "
                                      "(e.g. 'plugin-route-overview', 'collator-not-specified', 'qwen3-vl-moe').")


class SearchKnowledgeArgs(BaseModel):
    query: str = Field(description="Keywords or an error message to look up, e.g. 'apply_modules no module named'.")
    kind: str | None = Field(default=None, description="Restrict to 'doc', 'case' or 'failure'; omit for all.")
    k: int = Field(default=5, ge=1, le=20, description="Number of hits to return.")


def read_knowledge_tool():
    return make_tool(
        "read_knowledge",
        "Read one knowledge entry (framework doc, similar migration case or failure case) by id. "
        "Returns its structured fields and Markdown body.",
        ReadKnowledgeArgs,
        lambda entry_id: read_knowledge(entry_id),
    )


def search_knowledge_tool():
    return make_tool(
        "search_knowledge",
        "Search the knowledge base (docs, similar cases, failure cases) by keywords or an error message; "
        "returns ranked ids to read with read_knowledge.",
        SearchKnowledgeArgs,
        lambda query, kind=None, k=5: search_knowledge(query, kind, k),
    )
