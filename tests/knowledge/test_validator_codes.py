"""Cross-check with the YAML validator: every finding code it can emit is explained by some failure case.

The codes are read from the validator's source (string literals passed to Finding / _add / add, plus the
f"{what}-unregistered" / f"{what}-outside-plugin" families), so a new validator code without a knowledge entry fails
here instead of silently falling through to BM25.
"""

import re
from pathlib import Path

import pytest

import msmigrate
from msmigrate.knowledge.catalog import (FINDING_CODE_ALIASES, FINDING_CODE_CASES, FINDING_CODES,
                                         canonical_finding_code, load_catalog)

VALIDATOR = Path(msmigrate.__file__).parent / "tools" / "yaml_validator"
CALL = re.compile(r"""(?:Finding\(|_add\(|\badd\()\s*(?:"[a-z]+"|sev|severity|[^,]+?),\s*"([a-z][a-z0-9-]+)\"""")


def _emitted_codes() -> set[str]:
    codes: set[str] = set()
    for path in VALIDATOR.glob("*.py"):
        text = path.read_text()
        codes |= set(CALL.findall(text))
        codes |= set(re.findall(r'code\s*=\s*"([a-z][a-z0-9-]+)"', text))
        codes |= set(re.findall(r'\("([a-z][a-z0-9]*(?:-[a-z0-9]+)+)",\s*f?"', text))  # (code, message) tuples
        for what, need_plugin in re.findall(r'registered\(.*?"([a-z-]+)",\s*(True|False)\)', text, re.S):
            codes.add(f"{what}-unregistered")
            if need_plugin == "True":  # only plugin-backed registries can be outside the plugin list
                codes.add(f"{what}-outside-plugin")
    return codes


@pytest.mark.skipif(not VALIDATOR.is_dir(), reason="validator not present")
def test_every_validator_code_is_explained():
    explained = {c for e in load_catalog().failures() for c in e.meta["finding_codes"]}
    emitted = _emitted_codes()
    assert emitted, "found no codes in the validator source"
    unexplained = sorted(c for c in emitted
                         if c not in FINDING_CODE_CASES and canonical_finding_code(c) not in explained)
    assert unexplained == []


def test_aliases_point_into_the_vocabulary():
    assert set(FINDING_CODE_ALIASES.values()) <= set(FINDING_CODES)
    catalog = load_catalog()
    assert all(catalog.get(case_id) for case_id in FINDING_CODE_CASES.values())
