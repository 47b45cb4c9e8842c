"""A new vision projector, built by model_id from the target's registry and run once behind the encoder on random
images in the target runtime (probe megatron_projector_forward): images -> encoder (by its model_id) -> projector.
It passes when the output is finite, as wide as the text decoder's hidden size, and has one row per image token
(the encoder's patches divided by the projector's merge and pool). What it proves: the class the migration wrote
imports, builds from its model-JSON fields, and takes what the encoder gives. Not proven: that it computes the
source's projector (no source weights are loaded).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron.component_forward import ComponentForward, checked_forward, component_args, patch_grid
from msmigrate.tools.megatron.projector_converter import registry_ref
from msmigrate.tools.megatron import PROBES_DIR
from msmigrate.tools.runtime import run_probe

ProjectorForward = ComponentForward  # the same result: facts, problems, the missing module, an error


def projector_forward(runtime_python: str, target: Path, *, registry_file: str, registry: str, model_id: str,
                      fields: dict[str, Any], encoder: dict[str, Any], text_hidden: int, images: int = 2,
                      timeout: float = 300.0) -> ProjectorForward:
    """``encoder``: the new encoder's design (its registry / specs ``tables``, ``model_id``, ``json_fields``)."""
    e = encoder["json_fields"]
    grid = patch_grid(e)
    if grid is None:
        return ProjectorForward(error=f"no square patch grid from the encoder's num_positions {e.get('num_positions')}")
    patches, side = grid
    (reg_file, reg), (spec_file, specs) = (encoder["tables"][k].split(":") for k in ("registry", "specs"))
    enc = component_args(target, registry_file=reg_file, registry=reg, specs_file=spec_file, specs=specs,
                         model_id=encoder["model_id"], fields=e)
    enc_flags = dict(zip(enc[::2], enc[1::2]))  # the encoder's flags, passed under --encoder-* names
    args = ["--target", enc_flags["--target"], "--registry", registry_ref(registry_file, registry),
            "--model-id", model_id, "--fields", json.dumps(fields),
            *(x for k in ("registry", "specs", "model-id", "fields") for x in (f"--encoder-{k}", enc_flags[f"--{k}"])),
            "--images", str(images), "--image-size", str(side * int(e["patch_size"]))]
    res = run_probe(runtime_python, "megatron_projector_forward", args, probes_dir=PROBES_DIR,
                    cwd=target, timeout=timeout)
    tokens = patches // int(fields.get("merge") or 1) // int(fields.get("pool") or 1)
    return checked_forward(res, want=[images * tokens, int(text_hidden)],
                           want_why=f"{images} images x {tokens} tokens, the text decoder's width {text_hidden}",
                           keys=("class", "encoder_output_shape", "output_shape", "finite"))
