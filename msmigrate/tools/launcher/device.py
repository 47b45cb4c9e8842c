"""Which device a launch runs on, decided from the env probe run in the *target runtime* (never in this process)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.runtime import run_probe

DEVICE_KINDS = ("npu", "cuda", "cpu")


@dataclass
class DeviceInfo:
    kind: str  # npu | cuda | cpu
    count: int  # accelerators usable by the runtime (0 on cpu)
    cann_set_env: list[str] = field(default_factory=list)  # CANN set_env.sh files to source (NPU only)
    npu_smi_npus: list[dict[str, Any]] = field(default_factory=list)
    torch: str | None = None
    transformers: str | None = None
    torch_npu: dict[str, Any] = field(default_factory=dict)
    mindspeed_mm: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    error: str | None = None

    @classmethod
    def from_probe(cls, result: dict[str, Any]) -> "DeviceInfo":
        kind = result.get("device", "cpu")
        count = {"npu": result.get("npu_count", 0), "cuda": result.get("cuda", {}).get("count", 0)}.get(kind, 0)
        return cls(
            kind=kind,
            count=int(count or 0),
            cann_set_env=list(result.get("cann_set_env", [])),
            npu_smi_npus=list(result.get("npu_smi", {}).get("npus", [])),
            torch=result.get("torch"),
            transformers=result.get("transformers"),
            torch_npu=dict(result.get("torch_npu", {})),
            mindspeed_mm=result.get("mindspeed_mm"),
            warnings=list(result.get("warnings", [])),
        )


def detect_device(
    runtime_python: str, target: Path | None = None, *, env_extra: dict[str, str] | None = None, timeout: float = 180.0
) -> DeviceInfo:
    """Run ``env_probe`` in the target runtime; a failed probe yields ``kind='cpu'`` with ``error`` set."""
    args = ["--target", str(target)] if target is not None else []
    res = run_probe(runtime_python, "env_probe", args, env_extra=env_extra, timeout=timeout)
    if not res.ok and "result" not in res.data:
        return DeviceInfo(kind="cpu", count=0, error=res.error)
    info = DeviceInfo.from_probe(res.data["result"])
    if not res.ok:
        info.error = res.error
    return info


def resolve_device(requested: str, detected: DeviceInfo) -> tuple[str, str | None]:
    """The device to launch on: ``auto`` takes the detected one; asking for an accelerator the runtime lacks is an
    expected failure (returned as an error), asking for cpu always works."""
    if requested == "auto":
        return detected.kind, None
    if requested not in DEVICE_KINDS:
        return detected.kind, f"unknown device {requested!r}; use auto, npu, cuda or cpu"
    if requested != "cpu" and detected.kind != requested:
        return requested, f"device {requested} requested but the target runtime offers {detected.kind}" + (
            f" ({'; '.join(detected.warnings)})" if detected.warnings else ""
        )
    return requested, None
