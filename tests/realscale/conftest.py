"""Real-scale fixtures (msmigrate/testbeds/fixtures/realscale.py) are GBs of weights and minutes per migration:
tests here are marked ``realscale`` and run only when asked for (``pytest -m realscale tests/realscale``)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    if "realscale" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="real-scale fixture: run with -m realscale")
    for item in items:
        if "realscale" in item.keywords:
            item.add_marker(skip)
