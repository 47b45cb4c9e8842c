"""The faces' test hook: replace a run's policy, tools and gates without touching the graph.

``MSMIGRATE_RUN_HOOK=package.module:function`` names a factory ``function(spec, run_id, settings) -> dict`` whose
result is passed to ``Run(...)`` as keyword arguments (``policy``, ``tools``, ``gates``). The chat, batch and eval
faces honour it, so tests can drive the real programs (pexpect, subprocesses) with a scripted policy and recorded-
shape gates. It is a development hook: never set it for real migrations."""

from __future__ import annotations

import importlib
import os
from typing import Any

HOOK_ENV = "MSMIGRATE_RUN_HOOK"


def run_overrides(spec: Any, run_id: str, settings: Any) -> dict[str, Any]:
    ref = os.environ.get(HOOK_ENV, "").strip()
    if not ref:
        return {}
    module, _, func = ref.partition(":")
    if not func:
        raise ValueError(f"{HOOK_ENV} must be 'module:function', got {ref!r}")
    factory = getattr(importlib.import_module(module), func)
    return dict(factory(spec, run_id, settings))
