"""Weight-layout round trip for the Megatron route, run in the target runtime (torch lives there, not here).

The probe builds a tiny random decoder with the source's head counts, converts HF -> Megatron (fused QKV ordered
by key/value group, gate+up stacked) -> HF, checks the fused order row by row and that every tensor comes back
bit-identical. What it proves: the layout convention for these head counts; not a conversion of the real weights.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron import PROBES_DIR
from msmigrate.tools.runtime import run_probe


@dataclass
class RoundTripResult:
    ok: bool = False
    problems: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # heads, kv_heads, head_dim, layers, tensor counts
    error: str | None = None  # the probe could not run or could not read the config

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def converter_roundtrip(runtime_python: str, source: Path | None = None, *, layers: int = 2,
                        head_dim: int = 8, tp: int = 1, timeout: float = 120.0) -> RoundTripResult:
    """``tp``: the launch's tensor-parallel size; each rank's row block of the fused QKV is checked."""
    args = ["--layers", str(layers), "--head-dim", str(head_dim), "--tp", str(tp)]
    if source is not None:
        args += ["--config", str(Path(source) / "config.json")]
    res = run_probe(runtime_python, "megatron_qkv_roundtrip", args, probes_dir=PROBES_DIR, timeout=timeout)
    payload = res.data.get("result") or {}
    if not res.ok and not payload.get("problems"):
        return RoundTripResult(error=res.error or "probe failed")
    facts = {k: payload.get(k) for k in ("heads", "kv_heads", "head_dim", "layers", "bias", "tensors",
                                         "megatron_tensors", "tp", "layers_checked")}
    return RoundTripResult(ok=bool(payload.get("ok")), problems=list(payload.get("problems") or []), facts=facts)
