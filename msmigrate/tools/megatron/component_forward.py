"""A new vision encoder, built by model_id from the target's registry and run once on random images in the target
runtime (probe megatron_component_forward). It passes when the output is finite and holds one row per patch
(class tokens dropped) of the encoder's width. What it proves: the class the migration wrote imports, builds from
its model-JSON fields and the reused layer spec, and its forward runs. Not proven: that it computes the source's
tower (no source weights are loaded).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.core.tool_result import ToolResult
from msmigrate.tools.megatron import PROBES_DIR
from msmigrate.tools.runtime import run_probe


@dataclass
class ComponentForward:
    ok: bool = False
    facts: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    missing_module: str | None = None  # the import that failed outright (torch_npu, megatron: the environment)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def component_args(target: Path, *, registry_file: str, registry: str, specs_file: str, specs: str, model_id: str,
                   fields: dict[str, Any]) -> list[str]:
    """The probe flags that name a component the framework's way: ``module:TABLE`` for the registry and the layer
    spec table (module paths from the target-relative files), the model_id and its model-JSON fields."""
    def module(rel: str) -> str:
        return rel[:-3].replace("/", ".")
    return ["--target", str(Path(target).resolve()), "--registry", f"{module(registry_file)}:{registry}",
            "--specs", f"{module(specs_file)}:{specs}", "--model-id", model_id, "--fields", json.dumps(fields)]


def patch_grid(fields: dict[str, Any]) -> tuple[int, int] | None:
    """(patches per image, grid side) from an encoder's model-JSON fields (class tokens dropped); None when the
    patches do not make a square grid."""
    patches = int(fields.get("num_positions") or 0) - int(fields.get("class_token_len") or 0)
    side = round(patches ** 0.5)
    return (patches, side) if patches > 0 and side * side == patches else None


def checked_forward(res: ToolResult, *, want: list[int], want_why: str, keys: tuple[str, ...]) -> ComponentForward:
    """A forward probe's outcome: its failure as reported (with the module that was missing), else its facts and
    the problems with its output (shape other than ``want``, non-finite values)."""
    payload = res.data.get("result") or {}
    if not payload:
        return ComponentForward(error=res.error or "probe failed")
    if not payload.get("ok"):
        return ComponentForward(error=f"{payload.get('exception')}: {payload.get('message')}",
                                missing_module=payload.get("missing"))
    out = ComponentForward(facts={k: payload.get(k) for k in keys})
    if payload.get("output_shape") != want:
        out.problems.append(f"output shape {payload.get('output_shape')}, want {want} ({want_why})")
    if not payload.get("finite"):
        out.problems.append("the output is not finite")
    out.ok = not out.problems
    return out


def component_forward(runtime_python: str, target: Path, *, registry_file: str, registry: str, specs_file: str,
                      specs: str, model_id: str, fields: dict[str, Any], images: int = 2,
                      timeout: float = 300.0) -> ComponentForward:
    grid = patch_grid(fields)
    if grid is None:
        return ComponentForward(error=f"no square patch grid from num_positions {fields.get('num_positions')} "
                                      f"and class_token_len {fields.get('class_token_len')}")
    patches, side = grid
    args = component_args(target, registry_file=registry_file, registry=registry, specs_file=specs_file, specs=specs,
                          model_id=model_id, fields=fields)
    args += ["--images", str(images), "--image-size", str(side * int(fields["patch_size"]))]
    res = run_probe(runtime_python, "megatron_component_forward", args, probes_dir=PROBES_DIR,
                    cwd=target, timeout=timeout)
    return checked_forward(res, want=[images * patches, int(fields["hidden_size"])],
                           want_why=f"{images} images x {patches} patches, width {fields['hidden_size']}",
                           keys=("class", "output_shape", "finite", "parameters"))
