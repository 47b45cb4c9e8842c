"""Every failure case: loads, its patterns match its own example and no neighbour's example unless declared."""

import re

import pytest

from msmigrate.knowledge.catalog import AUTOFIX_ACTIONS, FINDING_CODES, OWNERS, load_catalog

CATALOG = load_catalog()
FAILURES = sorted(CATALOG.failures(), key=lambda e: e.id)
WITH_PATTERNS = [e for e in FAILURES if e.meta["patterns"]]


def _declared(a, b) -> bool:
    return b.id in a.meta.get("overlaps", []) or a.id in b.meta.get("overlaps", [])


def test_catalog_size_and_owner_coverage():
    assert len(FAILURES) >= 55
    assert {e.meta["owner"] for e in FAILURES} == set(OWNERS)


@pytest.mark.parametrize("entry", WITH_PATTERNS, ids=lambda e: e.id)
def test_pattern_matches_own_example(entry):
    assert any(re.search(p, entry.meta["example"]) for p in entry.meta["patterns"]), entry.id


@pytest.mark.parametrize("entry", WITH_PATTERNS, ids=lambda e: e.id)
def test_pattern_does_not_match_undeclared_neighbours(entry):
    offenders = [other.id for other in FAILURES
                 if other is not entry and not _declared(entry, other)
                 and any(re.search(p, other.meta["example"]) for p in entry.meta["patterns"])]
    assert offenders == [], f"{entry.id} also matches {offenders}; tighten it or declare overlaps"


def test_declared_overlaps_exist_and_priority_orders_them():
    """A declared overlap must name a real case, and the two cases must have different priorities so the
    classifier's choice between them is deliberate."""
    for entry in FAILURES:
        for other_id in entry.meta.get("overlaps", []):
            other = CATALOG.get(other_id)
            assert other is not None, f"{entry.id} overlaps unknown {other_id}"
            assert entry.meta.get("priority", 50) != other.meta.get("priority", 50), (entry.id, other_id)


def test_every_validator_finding_code_is_explained():
    explained = {code for e in FAILURES for code in e.meta["finding_codes"]}
    assert set(FINDING_CODES) <= explained, sorted(set(FINDING_CODES) - explained)


def test_autofix_actions_use_the_vocabulary():
    seen = set()
    for entry in FAILURES:
        fix = entry.meta.get("autofix")
        if fix is None:
            continue
        for action in fix if isinstance(fix, list) else [fix]:
            assert action["action"] in AUTOFIX_ACTIONS
            seen.add(action["action"])
    assert {"set_yaml", "set_env", "rename_yaml_key", "apply_modules_from_tree",
            "recompute_apply_modules_from_tree", "add_collator_id"} <= seen


@pytest.mark.parametrize("case_id", [
    "collator-not-specified", "fsdp-apply-modules-no-match", "torch-npu-backend-extension",
    "plugin-import-failed", "plugin-not-list",
])
def test_seed_named_cases_present(case_id):
    assert CATALOG.get(case_id) is not None


def test_backend_extension_case_names_libhccl():
    entry = CATALOG.get("torch-npu-backend-extension")
    assert "Failed to load the backend extension: torch_npu" in entry.meta["example"]
    assert "libhccl.so" in entry.meta["cause"]
