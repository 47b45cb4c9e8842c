"""Probe: what the target runtime offers (runs IN the target runtime; imports nothing from msmigrate).

    python env_probe.py [--target] [<MindSpeed-MM root>]

Prints one line ``MSMIGRATE_PROBE_RESULT {json}`` with: python/torch/transformers versions and, from installed
metadata, those of other training libraries (``packages``); torch_npu (found,
importable, error); ``npu-smi info`` (present, NPUs listed with health and HBM); torch.npu / torch.cuda device counts;
CANN ``set_env.sh`` files found; whether ``mindspeed_mm`` imports with NON_MEGATRON=true from the target root; and the
resulting ``device`` (npu > cuda > cpu; NPU only when torch_npu imports AND devices are visible).

torch_npu is imported only if its spec is found (and after torch); nothing here installs or changes anything.
"""
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys

RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "
# Documented CANN install locations (toolkit layout, newer cann/ layout, NNAL/ATB); an extra list may come from env.
CANN_SET_ENV_CANDIDATES = (
    "/usr/local/Ascend/ascend-toolkit/set_env.sh",
    "/usr/local/Ascend/cann/set_env.sh",
    "/usr/local/Ascend/nnal/atb/set_env.sh",
)
# `npu-smi info` device row: "| 0     910B3               | OK            | 95.6        36   ..."
NPU_ROW = re.compile(r"^\|\s*(\d+)\s+([A-Za-z0-9][\w.-]*)\s+\|\s*([A-Za-z]+)\s*\|")
# the chip row below it ends with HBM usage "used / total |"
HBM_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)\s*\|\s*$")
VERSION = re.compile(r"npu-smi\s+(\S+)")
# Libraries a training run's failures most often depend on the release of, read from their installed metadata (no
# import): the classify prompt shows them so that "this release lacks that API" can be checked, not guessed.
PACKAGES = ("accelerate", "peft", "deepspeed", "datasets", "tokenizers", "safetensors", "numpy", "torchvision",
            "flash-attn", "mindspeed", "megatron-core", "apex")


def emit(payload):
    print(RESULT_MARKER + json.dumps(payload, default=str), flush=True)


def parse_npu_smi(text):
    """NPUs from `npu-smi info` output: [{id, name, health, hbm_used_mb, hbm_total_mb}]."""
    npus, current = [], None
    for line in text.splitlines():
        m = NPU_ROW.match(line)
        if m and not m.group(2).startswith("0000:"):
            current = {"id": int(m.group(1)), "name": m.group(2), "health": m.group(3)}
            npus.append(current)
            continue
        if current is not None and "hbm_total_mb" not in current and line.startswith("|"):
            pair = HBM_PAIR.search(line)
            if pair and re.search(r"\b[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:", line):  # the Bus-Id chip row
                current["hbm_used_mb"], current["hbm_total_mb"] = int(pair.group(1)), int(pair.group(2))
        if "Process id" in line:  # the process table follows; no more device rows
            break
    version = VERSION.search(text)
    return {"version": version.group(1) if version else None, "npus": npus}


def probe_npu_smi():
    path = shutil.which("npu-smi")
    if path is None:
        return {"present": False}
    try:
        out = subprocess.run([path, "info"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"present": True, "path": path, "error": f"{type(exc).__name__}: {exc}"}
    info = {"present": True, "path": path, "returncode": out.returncode, **parse_npu_smi(out.stdout)}
    if out.returncode != 0:
        info["error"] = (out.stderr or out.stdout).strip()[-500:]
    return info


def package_versions(names=PACKAGES):
    """{distribution: version or None (not installed)}, from installed metadata only."""
    found = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def module_version(name):
    try:
        mod = importlib.import_module(name)
    except Exception as exc:  # probe boundary: any import failure is a fact to report
        return None, f"{type(exc).__name__}: {exc}"
    return getattr(mod, "__version__", "unknown"), None


def probe_torch_side():
    info = {}
    info["torch"], info["torch_error"] = module_version("torch")
    info["transformers"], info["transformers_error"] = module_version("transformers")
    npu = {"found": importlib.util.find_spec("torch_npu") is not None}
    if npu["found"] and info["torch"] is not None:
        npu["version"], npu["error"] = module_version("torch_npu")
        npu["importable"] = npu["error"] is None
    else:
        npu["importable"] = False
    info["torch_npu"] = npu
    info["npu_count"] = 0
    info["cuda"] = {"available": False, "count": 0}
    if info["torch"] is None:
        return info
    import torch

    if npu["importable"]:
        try:
            info["npu_count"] = int(torch.npu.device_count())
        except Exception as exc:  # probe boundary
            npu["count_error"] = f"{type(exc).__name__}: {exc}"
    try:
        available = bool(torch.cuda.is_available())
        info["cuda"] = {
            "available": available,
            "count": torch.cuda.device_count() if available else 0,
            "names": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if available else [],
        }
    except Exception as exc:  # probe boundary
        info["cuda"] = {"available": False, "count": 0, "error": f"{type(exc).__name__}: {exc}"}
    info["cpu_count"] = os.cpu_count()
    return info


def probe_mindspeed_mm(target):
    """Import mindspeed_mm from the target root with NON_MEGATRON=true, as the trainer would."""
    os.environ["NON_MEGATRON"] = "true"
    root = os.path.abspath(target)
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        mod = importlib.import_module("mindspeed_mm")
    except Exception as exc:  # probe boundary
        return {"importable": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"importable": True, "file": getattr(mod, "__file__", None)}


def cann_set_env_files():
    extra = [p for p in os.environ.get("MSMIGRATE_CANN_SET_ENV", "").split(os.pathsep) if p]
    home = os.environ.get("ASCEND_HOME_PATH") or os.environ.get("ASCEND_TOOLKIT_HOME")
    candidates = extra + ([os.path.join(os.path.dirname(home.rstrip("/")), "set_env.sh")] if home else [])
    candidates += list(CANN_SET_ENV_CANDIDATES)
    seen = []
    for path in candidates:
        if os.path.isfile(path) and path not in seen:
            seen.append(path)
    return seen


def decide_device(info):
    smi_npus = len(info["npu_smi"].get("npus", []))
    if info["torch_npu"]["importable"] and info["npu_count"] > 0:
        return "npu"
    if info["cuda"]["available"] and info["cuda"]["count"] > 0:
        return "cuda"
    if smi_npus:
        info.setdefault("warnings", []).append(
            f"npu-smi lists {smi_npus} NPU(s) but torch_npu is not usable in this runtime "
            f"({info['torch_npu'].get('error') or 'not installed'}); falling back to cpu"
        )
    return "cpu"


def main(argv):
    target = None
    if "--target" in argv:
        target = argv[argv.index("--target") + 1]
    elif argv and not argv[0].startswith("-"):  # also accepted: the target root as the only positional argument
        target = argv[0]
    info = {"python": platform.python_version(), "python_executable": sys.executable}
    info["npu_smi"] = probe_npu_smi()
    info.update(probe_torch_side())
    info["packages"] = package_versions()
    info["cann_set_env"] = cann_set_env_files()
    info["ascend_env"] = {k: v for k, v in os.environ.items() if k.startswith(("ASCEND_", "HCCL_"))}
    if target:
        info["mindspeed_mm"] = probe_mindspeed_mm(target)
    info["device"] = decide_device(info)
    emit(info)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
