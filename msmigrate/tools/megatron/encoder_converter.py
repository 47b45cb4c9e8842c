"""The weight converter for a NEW vision encoder (one the migration registered): the source's HF vision-tower
tensors -> the Megatron layout the written class builds -> HF, run in the target runtime (probe
megatron_encoder_converter). The mapping is derived from the built class's state_dict (names, shapes, the fused
QKV rows per query group) against the source's safetensors; no per-model table.

Passes when every class tensor is filled, the converted state_dict loads strictly into a fresh instance, and every
mapped HF tensor comes back bit-identical. HF tower tensors the class has no place for (e.g. norm biases when the
reused block's norms have none, norms outside the blocks) are listed as unmapped: a converted checkpoint drops
them, which is said, not hidden. Not proven: that the class computes the source's tower with these weights.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron.component_forward import component_args
from msmigrate.tools.megatron import PROBES_DIR
from msmigrate.tools.runtime import run_probe


@dataclass
class EncoderConversion:
    ok: bool = False
    facts: dict[str, Any] = field(default_factory=dict)  # counts, ops, sample mapping, mapping file
    unmapped_hf: list[str] = field(default_factory=list)  # HF tower tensors the class has no place for
    unfilled_megatron: list[str] = field(default_factory=list)  # class tensors no HF tensor fills
    problems: list[str] = field(default_factory=list)
    missing_module: str | None = None  # the import that failed outright (torch_npu, megatron: the environment)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def encoder_conversion(runtime_python: str, target: Path, source: Path, work_dir: Path, *, registry_file: str,
                       registry: str, specs_file: str, specs: str, model_id: str, fields: dict[str, Any],
                       timeout: float = 300.0) -> EncoderConversion:
    if not sorted(Path(source).glob("*.safetensors")):
        return EncoderConversion(error=f"{source} has no *.safetensors to convert")
    args = component_args(target, registry_file=registry_file, registry=registry, specs_file=specs_file, specs=specs,
                          model_id=model_id, fields=fields)
    args += ["--source", str(Path(source).resolve()), "--out", str(Path(work_dir).resolve())]
    res = run_probe(runtime_python, "megatron_encoder_converter", args, probes_dir=PROBES_DIR,
                    cwd=target, timeout=timeout)
    p = res.data.get("result") or {}
    if not p:
        return EncoderConversion(error=res.error or "probe failed")
    if p.get("exception"):
        return EncoderConversion(error=f"{p['exception']}: {p.get('message')}", missing_module=p.get("missing"))
    facts = {k: p.get(k) for k in ("class", "hf_tower_tensors", "mapped_hf", "megatron_tensors",
                                   "round_trip_identical", "strict_load", "ops", "mapping_file", "sample")}
    return EncoderConversion(ok=bool(p.get("ok")), facts=facts, unmapped_hf=list(p.get("unmapped_hf") or []),
                             unfilled_megatron=list(p.get("unfilled_megatron") or []),
                             problems=list(p.get("problems") or []))
