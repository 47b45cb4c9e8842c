"""How the faces open a run (``start_run``), and their test hook: replace a run's policy, tools and gates without
touching the graph.

``MSMIGRATE_RUN_HOOK=package.module:function`` names a factory ``function(spec, run_id, settings) -> dict`` whose
result is passed to ``Run(...)`` as keyword arguments (``policy``, ``tools``, ``gates``). Every face that opens runs
through ``start_run`` (run, verify, chat, batch, eval) honours it, so tests can drive the real programs (pexpect, subprocesses) with a scripted policy and recorded-
shape gates. It is a development hook: never set it for real migrations."""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from msmigrate.agent.config import RunSpec, Settings
    from msmigrate.agent.runner import Run

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


def start_run(settings: "Settings", *, spec: "RunSpec | None" = None, run_id: str | None = None,
              on_event: Callable[[str, dict[str, Any]], None] | None = None) -> "Run":
    """A new run of ``spec`` (id ``run_id``, or a fresh one), or — without a spec, or when ``run_id`` already has a
    run folder — that run reopened with the spec it was started with. FileNotFoundError (a user-readable line) for
    an unknown id without a spec."""
    from msmigrate.agent.runner import Run, new_run_id, run_spec

    if spec is None or (run_id is not None and (settings.runs_dir / run_id / "spec.yaml").is_file()):
        if run_id is None:
            raise ValueError("start_run needs a spec or the id of an existing run")
        spec = run_spec(run_id, settings)
    run_id = run_id or new_run_id(spec.model_name)
    return Run(spec, run_id, settings, on_event=on_event, **run_overrides(spec, run_id, settings))
