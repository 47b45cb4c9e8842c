"""A new vision projector, built by model_id from the target's registry and run once behind the encoder on random
images in the target runtime (probe megatron_projector_forward): images -> encoder (by its model_id) -> projector.
It passes when the output is finite, as wide as the text decoder's hidden size, and has one row per image token
(the encoder's patches divided by the projector's merge and pool). What it proves: the class the migration wrote
imports, builds from its model-JSON fields, and takes what the encoder gives. Not proven: that it computes the
source's projector (no source weights are loaded).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron.component_forward import component_args
from msmigrate.tools.megatron.projector_converter import registry_ref
from msmigrate.tools.runtime import run_probe


@dataclass
class ProjectorForward:
    ok: bool = False
    facts: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    missing_module: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def projector_forward(runtime_python: str, target: Path, *, registry_file: str, registry: str, model_id: str,
                      fields: dict[str, Any], encoder: dict[str, Any], text_hidden: int, images: int = 2,
                      timeout: float = 300.0) -> ProjectorForward:
    """``encoder``: the new encoder's design (its registry / specs ``tables``, ``model_id``, ``json_fields``)."""
    e = encoder["json_fields"]
    patches = int(e.get("num_positions") or 0) - int(e.get("class_token_len") or 0)
    side = round(patches ** 0.5)
    if patches <= 0 or side * side != patches:
        return ProjectorForward(error=f"no square patch grid from the encoder's num_positions {e.get('num_positions')}")
    (reg_file, reg), (spec_file, specs) = (encoder["tables"][k].split(":") for k in ("registry", "specs"))
    enc_args = component_args(target, registry_file=reg_file, registry=reg, specs_file=spec_file, specs=specs,
                              model_id=encoder["model_id"], fields=e)
    args = ["--target", enc_args[1], "--registry", registry_ref(registry_file, registry), "--model-id", model_id,
            "--fields", json.dumps(fields), "--encoder-registry", enc_args[3], "--encoder-specs", enc_args[5],
            "--encoder-model-id", enc_args[7], "--encoder-fields", enc_args[9],
            "--images", str(images), "--image-size", str(side * int(e["patch_size"]))]
    res = run_probe(runtime_python, "megatron_projector_forward", args, cwd=target, timeout=timeout)
    payload = res.data.get("result") or {}
    if not payload:
        return ProjectorForward(error=res.error or "probe failed")
    if not payload.get("ok"):
        return ProjectorForward(error=f"{payload.get('exception')}: {payload.get('message')}",
                                missing_module=payload.get("missing"))
    tokens = patches // int(fields.get("merge") or 1) // int(fields.get("pool") or 1)
    want = [images * tokens, int(text_hidden)]
    out = ProjectorForward(facts={k: payload.get(k) for k in ("class", "encoder_output_shape", "output_shape",
                                                             "finite")})
    if payload.get("output_shape") != want:
        out.problems.append(f"output shape {payload.get('output_shape')}, want {want} ({images} images x {tokens} "
                            f"tokens, the text decoder's width {text_hidden})")
    if not payload.get("finite"):
        out.problems.append("the output is not finite")
    out.ok = not out.problems
    return out
