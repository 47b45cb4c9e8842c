"""Whether the Megatron route's entry point imports in the target runtime (probe megatron_route_imports): each of
the entry's module-level imports, ok or the exception, and the modules that are missing outright.

On a CPU machine the real route stops here: MindSpeed's ``mindspeed.megatron_adaptor`` imports ``torch_npu`` at
import time, and ``megatron.training`` is Megatron-LM's (the megatron-core wheel ships ``megatron.core`` only).
The result names those modules; the gates turn them into "needs an accelerator", never into a pass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron import PROBES_DIR
from msmigrate.tools.runtime import run_probe

ENTRY = "pretrain_vlm.py"


@dataclass
class RouteImports:
    ok: bool = False
    imported: list[str] = field(default_factory=list)  # "module" or "module:name"
    failed: dict[str, str] = field(default_factory=dict)  # "module[:name]" -> "Exception: message"
    missing_modules: list[str] = field(default_factory=list)  # top-level causes, e.g. torch_npu, megatron
    error: str | None = None  # the probe did not run (entry missing, runtime broken)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_route_imports(runtime_python: str, target: Path, *, entry: str = ENTRY, modules: list[str] | None = None,
                        timeout: float = 300.0) -> RouteImports:
    args = ["--target", str(Path(target).resolve()), "--entry", entry]
    for m in modules or []:
        args += ["--module", m]
    res = run_probe(runtime_python, "megatron_route_imports", args, probes_dir=PROBES_DIR,
                    cwd=target, timeout=timeout)
    payload = res.data.get("result") or {}
    if not payload or payload.get("error"):
        return RouteImports(error=payload.get("error") or res.error or "probe failed")
    out = RouteImports(ok=bool(payload.get("ok")), missing_modules=list(payload.get("missing_modules") or []))
    for rec in payload.get("records") or []:
        key = rec["module"] + (f":{rec['name']}" if rec.get("name") else "")
        if rec.get("ok"):
            out.imported.append(key)
        else:
            out.failed[key] = f"{rec.get('exception')}: {rec.get('message')}"
    return out
