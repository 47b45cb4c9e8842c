"""The weight converter for a NEW vision projector (one the migration registered): the source's HF projector
tensors -> the written class's state_dict -> HF, in the target runtime (probe megatron_projector_converter). The
layout comes from the design (the source's parts in forward order onto the class's modules; a bare [in, out]
matrix transposed into a Linear weight) and is checked against the built class here.

Passes when every class tensor is filled, the converted state_dict loads strictly into a fresh instance and every
mapped HF tensor comes back bit-identical. HF tensors under the projector's module the layout leaves out are named
as unmapped. Not proven: that the class computes the source's projector with these weights.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron import PROBES_DIR
from msmigrate.tools.runtime import run_probe


@dataclass
class ProjectorConversion:
    ok: bool = False
    facts: dict[str, Any] = field(default_factory=dict)
    unmapped_hf: list[str] = field(default_factory=list)
    unfilled_megatron: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    missing_module: str | None = None  # the import that failed outright (torch_npu, megatron: the environment)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def registry_ref(registry_file: str, registry: str) -> str:
    """``module:TABLE`` for a registry table in a target-relative file."""
    return f"{registry_file[:-3].replace('/', '.')}:{registry}"


def projector_conversion(runtime_python: str, target: Path, source: Path, work_dir: Path, *, registry_file: str,
                         registry: str, model_id: str, fields: dict[str, Any], layout: dict[str, Any], root: str,
                         timeout: float = 300.0) -> ProjectorConversion:
    if not sorted(Path(source).glob("*.safetensors")):
        return ProjectorConversion(error=f"{source} has no *.safetensors to convert")
    args = ["--target", str(Path(target).resolve()), "--registry", registry_ref(registry_file, registry),
            "--model-id", model_id, "--fields", json.dumps(fields), "--layout", json.dumps(layout), "--root", root,
            "--source", str(Path(source).resolve()), "--out", str(Path(work_dir).resolve())]
    res = run_probe(runtime_python, "megatron_projector_converter", args, probes_dir=PROBES_DIR,
                    cwd=target, timeout=timeout)
    p = res.data.get("result") or {}
    if not p:
        return ProjectorConversion(error=res.error or "probe failed")
    if p.get("exception"):
        return ProjectorConversion(error=f"{p['exception']}: {p.get('message')}", missing_module=p.get("missing"))
    facts = {k: p.get(k) for k in ("class", "hf_projector_tensors", "mapped_hf", "megatron_tensors",
                                   "round_trip_identical", "strict_load", "ops", "mapping_file")}
    return ProjectorConversion(ok=bool(p.get("ok")), facts=facts, unmapped_hf=list(p.get("unmapped_hf") or []),
                               unfilled_megatron=list(p.get("unfilled_megatron") or []),
                               problems=list(p.get("problems") or []))
