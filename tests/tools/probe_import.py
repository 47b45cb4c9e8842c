"""Import one of the runtime probes (``msmigrate/tools/probes/*.py``) in the test process, as its siblings see it:
the probes import each other by bare module name, so their folder goes on ``sys.path`` for the import only."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"


def import_probe(name: str):
    sys.path.insert(0, str(PROBES))
    try:
        sys.modules.pop(name, None)
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(PROBES))
