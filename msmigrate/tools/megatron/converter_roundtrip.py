"""The target's own weight converter, HF -> Megatron layout -> HF, on a tiny model, run in the target runtime
(probe megatron_converter_roundtrip). Passes when every tensor comes back bit-identical and, on a single-file
Megatron checkpoint, the fused text linear_qkv rows are in the framework's per-KV-group order.

What it proves: the target's converter (its rename / merge / TP-split / PP-partition operators, as the target
ships them) is lossless for this architecture at these sizes. Not proven: that the converted layout is what the
real Megatron model expects at load time (that needs the route's model built, i.e. an accelerator), nor anything
about the real weights. When the target's converter cannot be imported here, the result says which module was
missing; ``weight_roundtrip.converter_roundtrip`` is msmigrate's own layout round trip for that case.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron import PROBES_DIR
from msmigrate.tools.runtime import run_probe

PROBE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TQDM_DISABLE": "1"}


@dataclass
class ConverterRoundTrip:
    ok: bool = False
    problems: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)  # the target functions that ran, with the config type they got
    stubbed: list[str] = field(default_factory=list)  # imports replaced to let the target's code run, with why
    facts: dict[str, Any] = field(default_factory=dict)  # tensor counts, files, sizes, module
    error: str | None = None  # the probe could not run the converter (import failure, bad input, exception)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def target_converter_roundtrip(runtime_python: str, target: Path, converter: str, work_dir: Path, *,
                               hf_dir: Path | None = None, tiny_config: dict[str, Any] | Path | None = None,
                               shrink_source: Path | None = None,
                               tp: int = 1, pp: int = 1, vpp: int = 1, llm_pp_layers: list[list[int]] | None = None,
                               vit_pp_layers: list[list[int]] | None = None,
                               extra_paths: list[Path] | None = None, taps: dict[str, Any] | None = None,
                               timeout: float = 600.0) -> ConverterRoundTrip:
    """Round trip through ``converter`` (a class name in the target's checkpoint/ tree).

    Exactly one of ``hf_dir`` (an existing small HF folder), ``tiny_config`` (a config.json dict or path; the
    probe builds a random model of its architecture with the runtime's transformers) or ``shrink_source`` (the
    source folder: its config.json with 2 layers per stack and a 512 vocabulary, widths kept). ``llm_pp_layers`` /
    ``vit_pp_layers``: per-VPP lists of per-stage layer counts, default ``pp`` stages: the text layers spread
    evenly, the vision encoder whole on the first stage (a shrunk source keeps at least ``pp`` layers); ``vpp``
    virtual stages per rank: ``pp x vpp`` flat stages, and the probe checks the VPP layout against a single-stage
    conversion (the framework's mm_to_hf reads no VPP checkpoint).
    ``extra_paths``: more import roots for the probe (a MindSpeed checkout the target imports). ``taps``: the
    source's per-layer mergers and the attribute the encoder builds them on (tools/megatron/encoder_taps.py
    ``converter_taps``): each merger must land on the tap of the tower layer its index names.
    """
    if sum(x is not None for x in (hf_dir, tiny_config, shrink_source)) != 1:
        return ConverterRoundTrip(error="give exactly one of hf_dir, tiny_config or shrink_source")
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    args = ["--target", str(Path(target).resolve()), "--converter", converter, "--work", str(work_dir.resolve()),
            "--tp", str(tp), "--pp", str(pp), "--vpp", str(vpp)]
    if hf_dir is not None:
        args += ["--hf-dir", str(Path(hf_dir).resolve())]
    elif shrink_source is not None:
        args += ["--shrink-source", str(Path(shrink_source).resolve())]
    else:
        path = work_dir / "tiny_config.json"
        if isinstance(tiny_config, dict):
            path.write_text(json.dumps(tiny_config), encoding="utf-8")
        else:
            path.write_text(Path(tiny_config).read_text(encoding="utf-8"), encoding="utf-8")
        args += ["--tiny-config", str(path.resolve())]
    for extra in extra_paths or []:
        args += ["--extra-path", str(Path(extra).resolve())]
    if llm_pp_layers is not None:
        args += ["--llm-pp-layers", json.dumps(llm_pp_layers)]
    if vit_pp_layers is not None:
        args += ["--vit-pp-layers", json.dumps(vit_pp_layers)]
    if taps:
        args += ["--taps", json.dumps(taps)]
    res = run_probe(runtime_python, "megatron_converter_roundtrip", args, probes_dir=PROBES_DIR,
                    cwd=target, env_extra=PROBE_ENV,
                    timeout=timeout)
    payload = res.data.get("result") or {}
    if not payload or payload.get("error"):
        detail = payload.get("error") or res.error or "probe failed"
        return ConverterRoundTrip(error=detail, facts={k: payload[k] for k in ("module", "missing_module", "traceback")
                                                       if k in payload} or {"stderr_tail": res.data.get("stderr_tail")})
    facts = {k: payload.get(k) for k in ("module", "hf_tensors", "megatron_files", "megatron_tensors",
                                         "qkv_layers_checked", "tap_matrices_checked", "vpp_stages_checked", "vpp_files",
                                         "llm_pp_layers", "vit_pp_layers", "tp", "hf_dir",
                                         "notes", "sample_megatron_names")}
    facts["runtime_mode"] = res.data.get("runtime_mode")
    return ConverterRoundTrip(ok=bool(payload.get("ok")), problems=list(payload.get("problems") or []),
                              ran=list(payload.get("ran") or []), stubbed=list(payload.get("stubbed") or []),
                              facts=facts)
