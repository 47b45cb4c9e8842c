"""Probe: import ``training.plugin`` entries the way the trainer does, and catch what the trainer hides.

    python plugin_check.py --target <root> --plugin <entry> [--plugin <entry> ...]

Per entry, like ``import_plugin`` (contract §4): ``/`` -> ``.``, dots stripped, ``importlib.import_module``; a
``ModuleNotFoundError`` there is *swallowed* by the trainer (``Import failed: ...``, training goes on and later fails
with ``ID '...' is not registered.``); any other exception crashes it. For a package, ``pkgutil.walk_packages`` then
imports every non-package module (any exception crashes) and silently skips every sub-package whose ``__init__``
raises. This probe additionally walks the package directories itself and imports every sub-package directly, so
those silent skips are reported with their real error.

Result: ``plugins`` (per entry: module, imported, error, swallowed_by_trainer, modules_imported, module_errors,
skipped_subpackages), ``model_register`` / ``data_register`` (id -> "module.QualName" after all imports, read from the
Register's ``_registry`` dict), ``new_model_ids`` / ``new_data_ids`` (registered by the plugins), ``trainer_outcome``
(ok | crash | swallowed_failure).
"""
import argparse
import importlib
import json
import os
import pkgutil
import sys

RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "
REGISTER_MODULE = "mindspeed_mm.fsdp.utils.register"


def emit(payload):
    print(RESULT_MARKER + json.dumps(payload, default=str), flush=True)


def err(exc):
    return f"{type(exc).__name__}: {exc}"


def registry_dict(register):
    table = getattr(register, "_registry", None)
    if isinstance(table, dict):
        return table
    for value in vars(register).values():
        if isinstance(value, dict):
            return value
    return {}


def describe(table):
    return {k: f"{getattr(v, '__module__', '?')}.{getattr(v, '__qualname__', type(v).__name__)}" for k, v in table.items()}


def subpackages(pkg_name, paths):
    """Every package below ``pkg_name`` found on disk (dirs with __init__.py), depth-first, sorted."""
    found = []
    for base in paths:
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            if dirpath != base and "__init__.py" in filenames:
                rel = os.path.relpath(dirpath, base).replace(os.sep, ".")
                found.append(f"{pkg_name}.{rel}")
    return found


def check_entry(entry):
    name = entry.replace("/", ".").strip(".")
    report = {"entry": entry, "module": name, "imported": False, "modules_imported": [], "module_errors": [],
              "skipped_subpackages": []}
    try:
        pkg = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        report.update(error=err(exc), swallowed_by_trainer=True)
        return report
    except Exception as exc:  # probe boundary: any import error is a finding
        report.update(error=err(exc), swallowed_by_trainer=False)
        return report
    report["imported"] = True
    if not hasattr(pkg, "__path__"):
        return report
    # what the trainer does: walk_packages imports sub-packages (skipping failing ones) and we import the modules
    for _, sub, is_pkg in pkgutil.walk_packages(pkg.__path__, prefix=name + ".", onerror=lambda _n: None):
        if is_pkg:
            continue
        try:
            importlib.import_module(sub)
            report["modules_imported"].append(sub)
        except Exception as exc:  # probe boundary
            report["module_errors"].append({"module": sub, "error": err(exc)})
    # what the trainer does not do: import every sub-package directly to surface the silently skipped ones
    for sub in subpackages(name, list(pkg.__path__)):
        try:
            importlib.import_module(sub)
        except Exception as exc:  # probe boundary
            report["skipped_subpackages"].append({
                "package": sub, "error": err(exc),
                # walk_packages swallows ImportError from a sub-package; other exceptions propagate
                "silently_skipped_by_trainer": isinstance(exc, ImportError),
            })
    return report


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--plugin", action="append", default=[])
    args = ap.parse_args(argv)
    os.environ["NON_MEGATRON"] = "true"
    root = os.path.abspath(args.target)
    os.chdir(root)
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        register = importlib.import_module(REGISTER_MODULE)
    except Exception as exc:  # probe boundary
        emit({"error": f"cannot import {REGISTER_MODULE}: {err(exc)}"})
        return 1
    before_m = set(registry_dict(register.model_register))
    before_d = set(registry_dict(register.data_register))
    plugins = [check_entry(entry) for entry in args.plugin]
    models, datas = registry_dict(register.model_register), registry_dict(register.data_register)
    crash = any(p.get("swallowed_by_trainer") is False or p["module_errors"] or any(
        not s["silently_skipped_by_trainer"] for s in p["skipped_subpackages"]) for p in plugins)
    swallowed = any(p.get("swallowed_by_trainer") or p["skipped_subpackages"] for p in plugins)
    emit({
        "plugins": plugins, "model_register": describe(models), "data_register": describe(datas),
        "new_model_ids": sorted(set(models) - before_m), "new_data_ids": sorted(set(datas) - before_d),
        "trainer_outcome": "crash" if crash else ("swallowed_failure" if swallowed else "ok"),
    })
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
