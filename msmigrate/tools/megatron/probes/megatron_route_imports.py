"""Probe (Megatron route, static gate): do the entry point's imports import in this runtime?

    python megatron_route_imports.py --target ROOT [--entry pretrain_vlm.py] [--module M ...]

Runs in the target runtime, target root first on sys.path; imports nothing from msmigrate. Without --module the
list is the entry's own module-level imports, in its order (read by AST; the entry itself is not run). Each
``from X import Y`` counts as importing X and finding Y in it. Per import: ok, or the exception type, its message
and, for a missing module, which one (torch_npu, megatron, ...) - the root cause a CPU machine cannot remove.
"""
import argparse
import ast
import importlib
import json
import os
import sys
import time
from pathlib import Path

RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "


def emit(payload):
    print(RESULT_MARKER + json.dumps(payload, default=str), flush=True)


def entry_imports(path):
    out = []
    for node in ast.parse(Path(path).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out += [(node.module, a.name) for a in node.names]
    return out


def try_import(module, name):
    t0 = time.time()
    rec = {"module": module, "name": name}
    try:
        mod = importlib.import_module(module)
        if name is not None and not hasattr(mod, name):
            importlib.import_module(f"{module}.{name}")  # a submodule, as `from pkg import sub` allows
        rec["ok"] = True
    except Exception as exc:  # probe boundary: an import may raise anything (missing module, NPU init, patches)
        rec.update(ok=False, exception=type(exc).__name__, message=str(exc).splitlines()[0][:300] if str(exc) else "",
                   missing=getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None)
    rec["seconds"] = round(time.time() - t0, 2)
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--entry", default="pretrain_vlm.py")
    ap.add_argument("--module", action="append", default=[])
    a = ap.parse_args()
    root = str(Path(a.target).resolve())
    sys.path.insert(0, root)
    os.chdir(root)
    if a.module:
        wanted = [(m, None) for m in a.module]
    else:
        entry = Path(root) / a.entry
        if not entry.is_file():
            emit({"error": f"{a.entry} is not in {root}"})
            return
        wanted = entry_imports(entry)
    records = [try_import(m, n) for m, n in wanted]
    failed = [r for r in records if not r["ok"]]
    emit({"ok": not failed, "records": records, "imported": sum(r["ok"] for r in records), "failed": len(failed),
          "missing_modules": sorted({r["missing"] for r in failed if r.get("missing")}),
          "python": sys.version.split()[0]})


if __name__ == "__main__":
    main()
