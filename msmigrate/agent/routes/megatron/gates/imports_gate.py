"""Megatron route, import gate: the entry point's imports in the target runtime (probe megatron_route_imports).

Passes only when every import of the entry imports. When the only failures are modules the environment lacks
(``missing_modules``: torch_npu, megatron, ... not provided by the target tree), the record says
``needs_accelerator`` / ``blocked_by_environment``: that is a fact about this machine, not about the migration,
and the summary names the modules. A failure in the target's own code (a syntax error, a name a module does not
define, an exception at import) is a plain failure the migration must fix.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.tools.megatron.route_imports import ENTRY, RouteImports, check_route_imports


def environment_blocked(res: RouteImports, target: Path) -> bool:
    """Every failure is a missing module that the target tree does not provide itself."""
    if res.ok or res.error or not res.missing_modules:
        return False
    own = {m for m in res.missing_modules if (Path(target) / m).is_dir() or (Path(target) / f"{m}.py").is_file()}
    return not own and all(v.startswith("ModuleNotFoundError") for v in res.failed.values())


def megatron_imports_record(runtime_python: str, target: Path, entry: str = ENTRY, *,
                            timeout: float = 300.0) -> dict[str, Any]:
    t0 = time.time()
    res = check_route_imports(runtime_python, target, entry=entry, timeout=timeout)
    blocked = environment_blocked(res, target)
    lines = [f"{k}: {v}" for k, v in res.failed.items()]
    ev = evidence_item("megatron route imports", ["megatron_route_imports", entry], 0 if res.ok else 1, t0,
                       time.time(), res.error or "\n".join(lines),
                       {"imported": len(res.imported), "failed": len(res.failed),
                        "missing_modules": res.missing_modules})
    if res.error:
        summary = f"import check did not run: {res.error}"
    elif res.ok:
        summary = f"{entry}: all {len(res.imported)} imports import in the target runtime"
    elif blocked:
        summary = (f"{entry}: {len(res.failed)} of {len(res.failed) + len(res.imported)} imports need modules this "
                   f"environment lacks ({', '.join(res.missing_modules)}); needs the accelerator environment")
    else:
        summary = f"{entry}: imports fail in the target's own code: " + "; ".join(lines[:4])
    return {"gate": "imports", "backend": "megatron", "passed": res.ok, "needs_accelerator": blocked,
            "blocked_by_environment": blocked, "missing_modules": res.missing_modules, "summary": summary,
            "evidence": [ev], "failure_text": "" if res.ok else (res.error or "\n".join(lines))}


def gate_megatron_imports(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    ctx = deps.ctx
    return megatron_imports_record(ctx.runtime_python, ctx.target, state["plan"].get("entry") or ENTRY,
                                   timeout=ctx.probe_timeout_s)
