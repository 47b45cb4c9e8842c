"""Catalog loading: frontmatter parsing, validation errors, index text."""

import pytest

from msmigrate.knowledge.catalog import CatalogError, load_catalog, split_frontmatter


def test_packaged_catalog_has_all_kinds():
    catalog = load_catalog()
    assert {"plugin-route-overview", "plugin-route-yaml", "plugin-route-data", "plugin-route-parallel",
            "megatron-route", "ascend-environment"} <= {e.id for e in catalog.docs()}
    assert {"mm-qwen3-vl-moe", "standin-qwen3-vl", "standin-tiny-custom-lm"} <= {e.id for e in catalog.cases()}
    assert len(catalog.failures()) >= 55


def test_index_text_is_one_line_per_entry():
    catalog = load_catalog()
    lines = catalog.index_text().splitlines()
    assert len(lines) == len(catalog.entries)
    assert any(line.startswith("- [failure] collator-not-specified:") for line in lines)


def test_entry_body_is_read_on_demand():
    entry = load_catalog().get("megatron-route")
    assert "model_provider" in entry.body() and not entry.body().startswith("---")


def _write(tmp_path, kind, name, text):
    folder = tmp_path / kind
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(text)


GOOD_FAILURE = """---
id: x-case
title: X
owner: config
patterns: ['boom \\d+']
finding_codes: []
cause: c
fix: f
example: boom 1
---
body
"""


def test_tmp_catalog_loads(tmp_path):
    _write(tmp_path, "failures", "x-case", GOOD_FAILURE)
    catalog = load_catalog(tmp_path)
    assert catalog.get("x-case").meta["patterns"] == ["boom \\d+"]


@pytest.mark.parametrize("mutation, message", [
    (lambda t: t.replace("owner: config", "owner: ops"), "owner"),
    (lambda t: t.replace("id: x-case", "id: X_Case"), "kebab"),
    (lambda t: t.replace("boom \\d+", "boom ("), "regex"),
    (lambda t: t.replace("finding_codes: []", "finding_codes: [nope]"), "finding codes"),
    (lambda t: t.replace("example: boom 1", "example: boom 1\nautofix: {action: rm_rf}"), "autofix"),
    (lambda t: t.replace("example: boom 1\n", ""), "example"),
    (lambda t: t.replace("---\nid", "id"), "frontmatter"),
])
def test_malformed_entries_raise(tmp_path, mutation, message):
    _write(tmp_path, "failures", "x-case", mutation(GOOD_FAILURE))
    with pytest.raises(CatalogError, match=message):
        load_catalog(tmp_path)


def test_duplicate_ids_across_kinds_raise(tmp_path):
    _write(tmp_path, "failures", "x-case", GOOD_FAILURE)
    _write(tmp_path, "docs", "x-case", "---\nid: x-case\ntitle: doc\n---\nbody\n")
    with pytest.raises(CatalogError, match="duplicate"):
        load_catalog(tmp_path)


def test_split_frontmatter():
    meta, body = split_frontmatter("---\nid: a\n---\n\nhello\n")
    assert meta == {"id": "a"} and body == "hello\n"
