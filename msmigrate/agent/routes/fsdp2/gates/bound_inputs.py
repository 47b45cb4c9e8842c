"""Gates on an existing config whose model/data paths are the author's (``/home/data/...``): with input binding on
(``bind_inputs``; the default of ``msmigrate verify``), every gate reads a per-run copy of the YAML with those paths
set to the spec's source and data — the delivered file itself is never edited."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from msmigrate.agent.routes.fsdp2.draft_config import input_overrides
from msmigrate.tools.launcher.command import materialize_config


def binding_on(deps: Any) -> bool:
    spec = deps.spec
    bind = getattr(spec, "bind_inputs", None)
    return bool(bind) if bind is not None else getattr(spec, "policy", None) == "none"


def bound_overrides(deps: Any, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The overrides a gate launch adds (empty when binding is off); ``config``: the YAML being bound, whose
    ``training.load`` (weights from the author's folder) is rebound to the spec's source too."""
    if not binding_on(deps):
        return {}
    ctx = deps.ctx
    return input_overrides(ctx.source, ctx.data_path, cache_dir=ctx.run_dir / "dataset_cache", config=config)


def bound_config(deps: Any, config: Path) -> Path:
    """``config`` itself, or its bound copy under the run's probes/ folder."""
    if not config.is_file():
        return config
    try:
        current = yaml.safe_load(config.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        current = None
    overrides = bound_overrides(deps, current if isinstance(current, dict) else None)
    if not overrides:
        return config
    dest = deps.ctx.run_dir / "probes" / f"bound_{config.name}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        path, _ = materialize_config(config, overrides, dest)
    except (yaml.YAMLError, ValueError):
        # a YAML that does not load is the gate's finding, not a crash of the run: the gate's own load of the
        # file itself reports it (the framework's parser error), and the failure is classified like any other
        return config
    return path
