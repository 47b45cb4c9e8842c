"""Knowledge base: framework docs, similar migration cases and the failure catalog (frontmatter-indexed Markdown).

Public API:
- ``load_catalog()`` -> Catalog (``index_text()`` for prompts, ``get(id)``, ``failures()``, ``cases()``, ``docs()``)
- ``read_knowledge(id)`` / ``search_knowledge(query, kind, k)`` and their LangChain tools
- ``classify(log_text, finding_codes)`` -> Classification (``extract(log_text)`` -> RootCause: what it reads)
- ``OWNER_SEMANTICS`` / ``owner_semantics_text()``: who owns a failure, written once
"""

from msmigrate.knowledge.catalog import Catalog, CatalogError, KnowledgeEntry, load_catalog
from msmigrate.knowledge.classifier import Classification, classify
from msmigrate.knowledge.owners import OWNER_SEMANTICS, owner_semantics_text
from msmigrate.knowledge.retrieval import (read_knowledge, read_knowledge_tool, search_knowledge,
                                           search_knowledge_tool)
from msmigrate.knowledge.root_cause import RootCause, extract

__all__ = [
    "Catalog", "CatalogError", "Classification", "KnowledgeEntry", "OWNER_SEMANTICS", "RootCause", "classify",
    "extract", "load_catalog", "owner_semantics_text", "read_knowledge", "read_knowledge_tool", "search_knowledge",
    "search_knowledge_tool",
]
