"""The target runtime as the env probe found it at the start of the run, in lines for the classify prompt.

Why: when the LLM stage abstains between ``environment`` and another owner, the fact it names most often after the
run's settings is a version or a device: is the installed release one that lacks this API or option, does this chip
have the dtype, how much device memory is there, is torch_npu importable at all (round 20's blind player, asked what
its ``unknown`` answers lacked). Inside a run the prepare node has probed exactly that in the target runtime
(``tools/probes/env_probe.py``); showing it lets the model decide environment, or rule it out, from a checked fact.
Outside a run (the real-log corpus) there is no probe and the prompt has no such section.
"""

from __future__ import annotations

from typing import Any

from msmigrate.core.secret_mask import mask_mapping_by_name

MAX_ENV_VARS = 12  # ASCEND_* / HCCL_* variables shown; a long list is cut with a count


def _device_line(runtime: dict[str, Any]) -> str:
    device = runtime.get("device")
    kind = device.get("kind") if isinstance(device, dict) else device
    if not kind:
        return ""
    count = {"npu": runtime.get("npu_count"), "cuda": (runtime.get("cuda") or {}).get("count")}.get(kind)
    line = f"device: {kind}" + (f" x{count}" if count else "")
    npus = (runtime.get("npu_smi") or {}).get("npus") or []
    if npus:
        chips = sorted({f"{n.get('name')}" for n in npus})
        health = sorted({n.get("health") for n in npus if n.get("health")})
        line += f"; npu-smi lists {len(npus)} NPU(s): {', '.join(chips)} (health {', '.join(health) or '?'})"
        totals = [n["hbm_total_mb"] for n in npus if n.get("hbm_total_mb")]
        used = [n.get("hbm_used_mb", 0) for n in npus if n.get("hbm_total_mb")]
        if totals:
            line += f", HBM {min(totals)} MB each, {max(used)} MB already in use on the busiest"
    return line


def _torch_npu_line(runtime: dict[str, Any]) -> str:
    npu = runtime.get("torch_npu") or {}
    if not npu:
        return ""
    if not npu.get("found"):
        return "torch_npu: not installed"
    if npu.get("importable"):
        return f"torch_npu: {npu.get('version') or 'version unknown'} (imports)"
    return f"torch_npu: installed but does not import: {str(npu.get('error') or '')[:300]}"


def runtime_facts(runtime: dict[str, Any] | None) -> list[str]:
    """What the probe found, one fact per line; [] when the run has no probe result (a corpus excerpt, a test)."""
    if not runtime:
        return []
    lines = []
    versions = [f"{name} {runtime[name]}" for name in ("python", "torch", "transformers") if runtime.get(name)]
    versions += [f"{name} {version}" for name, version in sorted((runtime.get("packages") or {}).items()) if version]
    if versions:
        lines.append("installed: " + ", ".join(versions))
    lines += [line for line in (_torch_npu_line(runtime), _device_line(runtime)) if line]
    if "cann_set_env" in runtime:
        found = runtime.get("cann_set_env") or []
        lines.append("CANN set_env.sh: " + (", ".join(found) if found else "none found"))
    env = mask_mapping_by_name(runtime.get("ascend_env") or {})
    if env:
        shown = [f"{k}={str(v)[:120]}" for k, v in sorted(env.items())[:MAX_ENV_VARS]]
        more = len(env) - len(shown)
        lines.append("ASCEND_/HCCL_ variables: " + ", ".join(shown) + (f" (and {more} more)" if more > 0 else ""))
    mm = runtime.get("mindspeed_mm")
    if isinstance(mm, dict) and not mm.get("importable", True):
        lines.append(f"mindspeed_mm does not import: {str(mm.get('error') or '')[:300]}")
    lines += [f"probe warning: {w}" for w in runtime.get("warnings") or []]
    return lines
