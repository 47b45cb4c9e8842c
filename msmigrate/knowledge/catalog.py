"""Load the knowledge base: Markdown files with YAML frontmatter under ``docs/``, ``failures/`` and ``cases/``.

The frontmatter is the index (id, title, one-line description, structured fields); the body is read on demand.
Prompts get only the index (:meth:`Catalog.index_text`); the agent pulls bodies through ``read_knowledge``.

A malformed knowledge file is a bug in the package, not an expected failure, so loading raises
:class:`CatalogError` with the file name instead of returning a partial catalog.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import yaml

from msmigrate.knowledge.library_facts import FACTS
from msmigrate.knowledge.owners import OWNERS
from msmigrate.knowledge.real_log_corpus import split_of

KNOWLEDGE_ROOT = Path(__file__).resolve().parent
KINDS = {"docs": "doc", "failures": "failure", "cases": "case"}

# The closed vocabulary of deterministic fixes a failure case may carry (documented in failures/README.md).
# action -> required keys besides "action".
AUTOFIX_ACTIONS: dict[str, tuple[str, ...]] = {
    "set_yaml": ("path", "value"),
    "delete_yaml_key": ("path",),
    "rename_yaml_key": ("from", "to"),
    "wrap_yaml_list": ("path",),
    "set_env": ("name", "value"),
    "add_collator_id": ("value",),
    "apply_modules_from_tree": (),
    "recompute_apply_modules_from_tree": (),
}

# The finding codes the YAML validator emits; every one must be explained by at least one failure case.
FINDING_CODES = (
    "unknown-key", "misplaced-key", "missing-required", "bad-type", "bad-literal", "yaml-syntax",
    "duplicate-anchor", "flow-list-brace", "model-id-unregistered", "dataset-type-unregistered",
    "template-unknown", "collator-unknown", "collator-conflict", "collator-missing", "plugin-not-importable",
    "loss-type-invalid", "tp-not-one", "pattern-no-match", "apply-modules-none-match", "no-split-uncovered",
    "recompute-no-past-key-values", "weakened-config", "flash-attn-on-cpu", "value-out-of-range",
    "launch-entry-missing", "attn-unsupported", "launch-size", "launch-port", "launch-env",
    "checkpoint-state-absent", "precision-diverges", "launch-continuation", "launch-rendezvous-host",
    "rendezvous-host-unresolved", "runtime-default-dtype", "launch-dry-run", "optimizer-recipe",
    "optimizer-decay-groups", "data-order-recipe", "output-folder-unwritable", "freeze-recipe",
)

# Codes the concurrently written validator (msmigrate/tools/yaml_validator) actually emits that differ from the
# canonical names above, mapped onto them. `weakened-*` codes all map to weakened-config (see canonical_finding_code).
FINDING_CODE_ALIASES: dict[str, str] = {
    "type-mismatch": "bad-type",
    "bad-value": "bad-literal",
    "yaml-duplicate-anchor": "duplicate-anchor",
    "yaml-unquoted-pattern": "flow-list-brace",
    "yaml-duplicate-key": "yaml-syntax",
    "yaml-not-mapping": "yaml-syntax",
    "unknown-key-passthrough": "unknown-key",
    "read-by-entry-point": "unknown-key",  # an undeclared key a task entry point reads itself
    "model-id-outside-plugin": "model-id-unregistered",
    "plugin-missing": "model-id-unregistered",
    "dataset-type-outside-plugin": "dataset-type-unregistered",
    "template-unregistered": "template-unknown",
    "collator-unregistered": "collator-unknown",
    "bad-loss-type": "loss-type-invalid",
    "tp-unsupported": "tp-not-one",
    "recompute-rejects-past-key-values": "recompute-no-past-key-values",
    "flash-attn-off-npu": "flash-attn-on-cpu",
    "attn-unavailable": "flash-attn-on-cpu",  # G3: the runtime's own transformers reports it cannot run it here
}
# Validator codes that name a specific failure case directly (more precise than a canonical code).
FINDING_CODE_CASES: dict[str, str] = {
    "bad-dataloader-value": "dataloader-mode-unsupported",
    "bad-dtype": "dtype-unsupported",
    "ring-attention-needs-npu": "ring-attention-npu-only",
    "pattern-invalid": "brace-pattern-unrecognized",
    "chunk-loss-needs-loss-type": "chunk-loss-module",
}


def canonical_finding_code(code: str) -> str:
    """Map a validator finding code onto the canonical vocabulary (unknown codes pass through unchanged)."""
    if code.startswith("weakened-"):
        return "weakened-config"
    return FINDING_CODE_ALIASES.get(code, code)


_FRONTMATTER = re.compile(r"\A---\n(.*?)\n---\n?(.*)\Z", re.DOTALL)
_KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class CatalogError(ValueError):
    """A knowledge file is malformed (missing frontmatter, bad field, duplicate id)."""


@dataclass(frozen=True)
class KnowledgeEntry:
    id: str
    kind: str  # "doc" | "failure" | "case"
    title: str
    description: str
    path: Path
    meta: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def body(self) -> str:
        return split_frontmatter(self.path.read_text(encoding="utf-8"), self.path)[1]

    def index_line(self) -> str:
        return f"- [{self.kind}] {self.id}: {self.description}"


def split_frontmatter(text: str, source: Path | str = "<text>") -> tuple[dict[str, Any], str]:
    """Return (frontmatter dict, body) of a knowledge file."""
    match = _FRONTMATTER.match(text)
    if not match:
        raise CatalogError(f"{source}: missing '---' YAML frontmatter")
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise CatalogError(f"{source}: frontmatter is not valid YAML: {exc}") from exc
    if not isinstance(meta, dict):
        raise CatalogError(f"{source}: frontmatter must be a mapping")
    return meta, match.group(2).lstrip("\n")


def validate_autofix(autofix: Any, source: Path | str) -> list[dict[str, Any]]:
    """Normalise an ``autofix`` value (one action or a list) and check it against the vocabulary."""
    actions = autofix if isinstance(autofix, list) else [autofix]
    for action in actions:
        if not isinstance(action, dict) or action.get("action") not in AUTOFIX_ACTIONS:
            raise CatalogError(f"{source}: autofix action must be one of {sorted(AUTOFIX_ACTIONS)}: {action!r}")
        missing = [key for key in AUTOFIX_ACTIONS[action["action"]] if key not in action]
        if missing:
            raise CatalogError(f"{source}: autofix {action['action']} lacks {missing}")
    return actions


def _check_failure(meta: dict[str, Any], source: Path) -> None:
    for key in ("title", "owner", "patterns", "finding_codes", "cause", "fix", "example"):
        if key not in meta:
            raise CatalogError(f"{source}: failure case lacks '{key}'")
    if meta["owner"] not in OWNERS:
        raise CatalogError(f"{source}: owner must be one of {OWNERS}, got {meta['owner']!r}")
    for pattern in meta["patterns"]:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise CatalogError(f"{source}: bad regex {pattern!r}: {exc}") from exc
    unknown = set(meta["finding_codes"]) - set(FINDING_CODES)
    if unknown:
        raise CatalogError(f"{source}: unknown finding codes {sorted(unknown)}")
    if not meta["patterns"] and not meta["finding_codes"] and meta.get("example_kind") != "finding":
        raise CatalogError(f"{source}: a case needs patterns or finding codes")
    if meta.get("fact") is not None and meta["fact"] not in FACTS:
        raise CatalogError(f"{source}: fact must be one of {sorted(FACTS)}, got {meta['fact']!r}")
    if meta.get("autofix") is not None:
        validate_autofix(meta["autofix"], source)
    for example in meta.get("real_examples", []):
        # real examples feed the lexical stage: they may only come from the tuning half of the real-log corpus
        if not isinstance(example, dict) or not {"source", "text"} <= set(example):
            raise CatalogError(f"{source}: real_examples entries need 'source' and 'text'")
        if split_of(example["source"]) != "tuning":
            raise CatalogError(f"{source}: real example from the held-out half: {example['source']}")


def _load_entry(path: Path, kind: str) -> KnowledgeEntry:
    meta, _ = split_frontmatter(path.read_text(encoding="utf-8"), path)
    entry_id = meta.get("id")
    if not isinstance(entry_id, str) or not _KEBAB.match(entry_id):
        raise CatalogError(f"{path}: 'id' must be kebab-case, got {entry_id!r}")
    if entry_id != path.stem:
        raise CatalogError(f"{path}: id {entry_id!r} must equal the file name")
    if "title" not in meta:
        raise CatalogError(f"{path}: lacks 'title'")
    if kind == "failure":
        _check_failure(meta, path)
        description = f"{meta['title']} (owner: {meta['owner']})"
    else:
        description = meta.get("description") or meta["title"]
    return KnowledgeEntry(id=entry_id, kind=kind, title=meta["title"], description=description, path=path, meta=meta)


@dataclass
class Catalog:
    entries: dict[str, KnowledgeEntry]
    # Derived indexes (BM25, compiled patterns) built lazily by retrieval/classifier; keyed by their purpose.
    derived: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    def of_kind(self, kind: str) -> list[KnowledgeEntry]:
        return [e for e in self.entries.values() if e.kind == kind]

    def failures(self) -> list[KnowledgeEntry]:
        return self.of_kind("failure")

    def cases(self) -> list[KnowledgeEntry]:
        return self.of_kind("case")

    def docs(self) -> list[KnowledgeEntry]:
        return self.of_kind("doc")

    def get(self, entry_id: str) -> KnowledgeEntry | None:
        return self.entries.get(entry_id)

    def index_text(self, kinds: Iterable[str] = ("doc", "case", "failure")) -> str:
        """The compact index given to prompts: one line per entry, grouped by kind, ids sorted."""
        blocks = []
        for kind in kinds:
            lines = [e.index_line() for e in sorted(self.of_kind(kind), key=lambda e: e.id)]
            if lines:
                blocks.append("\n".join(lines))
        return "\n".join(blocks)


def load_catalog(root: Path | str | None = None) -> Catalog:
    """Load every entry under ``root`` (default: this package). Cached per root; files are read-only at run time."""
    return _load_catalog_cached(str(Path(root).resolve()) if root else str(KNOWLEDGE_ROOT))


@lru_cache(maxsize=8)
def _load_catalog_cached(root: str) -> Catalog:
    entries: dict[str, KnowledgeEntry] = {}
    for folder, kind in KINDS.items():
        for path in sorted((Path(root) / folder).glob("*.md")):
            if path.name == "README.md":
                continue
            entry = _load_entry(path, kind)
            if entry.id in entries:
                raise CatalogError(f"{path}: duplicate id {entry.id!r} (also {entries[entry.id].path})")
            entries[entry.id] = entry
    return Catalog(entries=entries)
