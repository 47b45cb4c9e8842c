"""Shared by the Megatron component probes: enter the target root, build a component the way the framework does
(``REGISTRY[model_id]`` with the layer spec from ``SPECS[model_id]``, the model-JSON fields as the config), and report
a failure to build in one shape (a missing module is named: torch_npu / megatron mean the accelerator environment).
Imports nothing from msmigrate: it runs in the target runtime next to the probe that imports it."""
import importlib
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "


def emit(payload):
    print(RESULT_MARKER + json.dumps(payload, default=str), flush=True)


def lookup(ref):
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def enter_target(target):
    root = str(Path(target).resolve())
    sys.path.insert(0, root)
    os.chdir(root)


def build_component(registry, specs, model_id, fields_json):
    """(class, config, instance) for ``model_id``; raises whatever the target's code raises."""
    cls = lookup(registry)[model_id]
    cfg = SimpleNamespace(**json.loads(fields_json))
    spec = lookup(specs)[model_id](cfg, is_vit=True)
    return cls, cfg, cls(config=cfg, transformer_layer_spec=spec)


def build_failure(exc):
    message = str(exc).splitlines()[0][:300] if str(exc) else ""
    return {"ok": False, "exception": type(exc).__name__, "message": message,
            "missing": getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None}


def build_projector(registry, model_id, fields_json):
    """(class, config, instance) for a projector ``model_id`` built without a layer spec (a class of plain torch
    modules, as the framework builds GlmMLP); raises whatever the target's code raises."""
    cls = lookup(registry)[model_id]
    cfg = SimpleNamespace(**json.loads(fields_json))
    return cls, cfg, cls(config=cfg, submodules=None)


def load_strict(fresh, mm, class_name):
    """(problems, the strict-load failure text or None): ``mm`` loaded strictly into a fresh instance and read back
    equal to what was converted."""
    import torch

    try:
        fresh.load_state_dict(mm, strict=True)
    except RuntimeError as exc:  # load_state_dict's strict mismatch report
        strict = " ".join(str(exc).split())[:600]
        return [f"strict load into {class_name} failed: {strict}"], strict
    loaded = fresh.state_dict()
    return [f"{n}: loaded tensor differs from the converted one" for n in mm if not torch.equal(loaded[n], mm[n])], None


def not_identical(back, hf):
    """HF names whose tensor did not come back bit-identical (dtype and values)."""
    import torch

    return [h for h in back if not (back[h].dtype == hf[h].dtype and torch.equal(back[h], hf[h]))]
