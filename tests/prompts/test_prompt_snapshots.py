"""Snapshot tests: every prompt rendered with the realistic sample state must equal its stored render.

When a template changes on purpose, regenerate with:  UPDATE_SNAPSHOTS=1 pytest tests/prompts
and review the diff of tests/prompts/snapshots/ like code.
"""

import os
from pathlib import Path

import pytest

from msmigrate.prompts.render import render
from msmigrate.prompts.sample_state import ALL_PROMPTS, sample_vars

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("UPDATE_SNAPSHOTS") == "1"


@pytest.mark.parametrize("name", ALL_PROMPTS)
def test_prompt_matches_snapshot(name):
    text = render(name, **sample_vars(name, live_index=False))
    path = SNAPSHOTS / f"{name}.txt"
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no snapshot for {name}; run UPDATE_SNAPSHOTS=1 pytest tests/prompts"
    assert text == path.read_text(encoding="utf-8"), (
        f"prompt {name!r} changed; if intended, run UPDATE_SNAPSHOTS=1 pytest tests/prompts and review the diff")


def test_no_orphan_snapshots():
    assert {p.stem for p in SNAPSHOTS.glob("*.txt")} == set(ALL_PROMPTS)
