"""Every example YAML of the real MindSpeed-MM snapshot through the product's round-trip editor: unedited, written
back byte for byte; edited (a few scalars, a new key), the output parses to the edited document and differs from the
example in those lines only (the property of tests/tools/test_yaml_roundtrip.py::check_edits). Read straight from
the snapshot tarball: no checkout or runtime needed."""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from test_yaml_roundtrip import check_edits  # noqa: E402

pytestmark = pytest.mark.realmm


def _examples(tarballs: Path) -> dict[str, str]:
    out = {}
    with tarfile.open(tarballs / "MindSpeed-MM.tar.gz") as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if member.isfile() and member.name.endswith((".yaml", ".yml")) and parts[1:2] == ("examples",):
                out[str(Path(*parts[2:]))] = tar.extractfile(member).read().decode("utf-8")
    return out


def test_every_example_yaml_round_trips_and_keeps_unedited_lines(realmm_tarballs):
    examples = _examples(realmm_tarballs)
    assert len(examples) >= 30, sorted(examples)  # the snapshot's examples folder, not an empty read
    failures = {}
    for name, text in sorted(examples.items()):
        try:
            check_edits(text)
        except AssertionError as exc:
            failures[name] = str(exc)[:300]
    assert not failures, failures
