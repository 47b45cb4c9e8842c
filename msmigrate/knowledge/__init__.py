"""Knowledge base: framework docs, similar migration cases and the failure catalog (frontmatter-indexed Markdown).

Public API:
- ``load_catalog()`` -> Catalog (``index_text()`` for prompts, ``get(id)``, ``failures()``, ``cases()``, ``docs()``)
- ``read_knowledge(id)`` / ``search_knowledge(query, kind, k)`` and their LangChain tools
- ``classify(log_text, finding_codes)`` -> Classification
"""

from msmigrate.knowledge.catalog import Catalog, CatalogError, KnowledgeEntry, load_catalog
from msmigrate.knowledge.classifier import Classification, classify
from msmigrate.knowledge.retrieval import (read_knowledge, read_knowledge_tool, search_knowledge,
                                           search_knowledge_tool)

__all__ = [
    "Catalog", "CatalogError", "Classification", "KnowledgeEntry", "classify", "load_catalog", "read_knowledge",
    "read_knowledge_tool", "search_knowledge", "search_knowledge_tool",
]
