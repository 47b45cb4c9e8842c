"""Probe: what the target runtime offers (runs IN the target runtime; imports nothing from msmigrate).

    python env_probe.py [--target] [<MindSpeed-MM root>] [--runtime-python <the runtime's interpreter path>]

Prints one line ``MSMIGRATE_PROBE_RESULT {json}`` with: python/torch/transformers versions and, from installed
metadata, those of other training libraries (``packages``); torch_npu (found,
importable, error); ``npu-smi info`` (present, NPUs listed with health and HBM); torch.npu / torch.cuda device counts;
CANN ``set_env.sh`` files found; whether ``mindspeed_mm`` imports with NON_MEGATRON=true from the target root; and the
resulting ``device`` (npu > cuda > cpu; NPU only when torch_npu imports AND devices are visible); ``attention``: which
``attn_implementation`` values this runtime can run, as its own transformers reports them; ``default_dtype``: torch's
default dtype in this interpreter; ``rank_limits``: the open-file limit of a process started with the variables the launcher gives each rank (``rank_view``).

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
COMM_ENV_PREFIXES = ("GLOO_", "NCCL_", "HCCL_", "TP_SOCKET_", "MASTER_", "TORCH_DIST", "TORCHELASTIC_")
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
    # the dtype a tensor made without one gets in this interpreter (float32 unless something at start-up, a
    # sitecustomize or a .pth hook, set another): a model built from its config and every buffer take it
    try:
        info["default_dtype"] = str(torch.get_default_dtype()).replace("torch.", "")
    except Exception as exc:  # probe boundary
        info["default_dtype_error"] = f"{type(exc).__name__}: {exc}"
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


def attention_available():
    """{attn_implementation: runnable here}, from the runtime's own transformers (its availability checks: the
    flash-attn package with a CUDA device, or torch_npu's fused attention); {} without transformers."""
    try:
        from transformers.utils import import_utils as iu
    except Exception:  # probe boundary: no transformers is reported by probe_torch_side
        return {}

    def asks(name):
        fn = getattr(iu, name, None)
        try:
            return bool(fn()) if fn else False
        except Exception:  # probe boundary: a check that itself fails says "not available"
            return False

    import torch

    return {"eager": True, "sdpa": hasattr(torch.nn.functional, "scaled_dot_product_attention"),
            "flash_attention_2": asks("is_flash_attn_2_available") or asks("is_torch_npu_available"),
            "flash_attention_3": asks("is_flash_attn_3_available")}


# what a launched rank gets that a plain process may not: torchrun sets these in every rank's environment, and a
# site hook, an activation script or a container entry point may act on them (a limit set only for trainer ranks)
RANK_ENV = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "0"}
_LIMITS = ("import resource, json, os, sys; s, h = resource.getrlimit(resource.RLIMIT_NOFILE); "
           "print(json.dumps({'nofile_soft': s, 'nofile_hard': h, 'comm_env': {k: v for k, v in os.environ.items() "
           "if k.startswith(%r)}, 'read_env': {k: os.environ[k] for k in sys.argv[1:] if k in os.environ}}))"
           % (COMM_ENV_PREFIXES,))
# a variable the target's own code reads: os.getenv("X", default), os.environ.get("X", default), os.environ["X"]
ENV_READ = re.compile(r"""(?:getenv|environ\.get)\(\s*["'](?P<name>[A-Za-z_]\w*)["']\s*(?:,\s*(?P<default>"""
                      r"""["'][^"'\n]*["']|[^)\n]*))?\)|environ\[\s*["'](?P<key>[A-Za-z_]\w*)["']\s*\]""")
# names whose values are credentials: never read into the run's records
SECRET_NAME = re.compile(r"(?i)key|token|secret|passw|credential|auth|cookie")
# the interpreter's own variables that change how any code runs in it (not read by the target's code)
INTERPRETER_ENV = ("PYTHONWARNINGS", "PYTHONDEVMODE", "PYTHONOPTIMIZE")
MAX_SCANNED = 5000
# what this probe sets itself (a rank's variables, the route's NON_MEGATRON): not the runtime's own settings
SET_BY_PROBE = frozenset({*RANK_ENV, "NON_MEGATRON"})  # Python files of the target's packages read for the variables they read


def target_env_reads(target):
    """The variables the target's own packages (the folders with an ``__init__.py`` at its root) read from the
    environment: {name: the default the code gives, as its source text, or None}. Credential-like names are left
    out. A value such a variable has in the runtime's environment changes what the target's code does without any
    file of the run changing."""
    found, scanned = {}, 0
    root = os.path.abspath(target)
    for top in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if not os.path.isfile(os.path.join(root, top, "__init__.py")):
            continue
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(f for f in files if f.endswith(".py")):
                scanned += 1
                if scanned > MAX_SCANNED:
                    return found
                try:
                    with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as fh:
                        text = fh.read()
                except OSError:
                    continue
                for m in ENV_READ.finditer(text):
                    var = m.group("name") or m.group("key")
                    if not SECRET_NAME.search(var):
                        default = (m.group("default") or "").strip()
                        found.setdefault(var, default[1:-1] if default[:1] in "'\"" and len(default) > 1 else
                                         (default or None))
    return found


def rank_view(python=None, names=()):
    """The open-file limit (soft, hard) of a process started with a rank's variables by ``python`` (the runtime's
    interpreter as the run names it, which the launcher starts too: a wrapper script's own settings apply; default
    this interpreter); -1 is unlimited; and the values that process has for ``names`` (the variables the target's
    code reads). An error string when the process could not be run."""
    env = {**os.environ, **RANK_ENV}
    try:
        out = subprocess.run([python or sys.executable, "-c", _LIMITS, *names], capture_output=True, text=True,
                             timeout=60, env=env)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


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
    # what the process group and the launcher read from the environment (an interface, an address, a port): a
    # failure that names one of these values is traced back to the variable that set it
    info["comm_env"] = {k: v for k, v in os.environ.items() if k.startswith(COMM_ENV_PREFIXES)}
    if target:
        info["mindspeed_mm"] = probe_mindspeed_mm(target)
    info["device"] = decide_device(info)
    if info.get("torch") is not None:
        info["attention"] = attention_available()
    runtime_python = argv[argv.index("--runtime-python") + 1] if "--runtime-python" in argv else None
    reads = target_env_reads(target) if target else {}
    info["rank_limits"] = rank_view(runtime_python, sorted({*reads, *INTERPRETER_ENV}))
    # a rank's variables as the runtime interpreter sets them (a wrapper script's exports) join the probe's own
    info["comm_env"] = {**info.get("comm_env", {}), **(info["rank_limits"].pop("comm_env", None) or {})}
    # the variables the target's code reads that a rank's environment sets to another value than the code's default:
    # they change what the target does with no file of the run changed (a failure quoting such a value is traced
    # back to the variable)
    values = info["rank_limits"].pop("read_env", None) or {}
    info["target_env"] = {k: {"value": v, "default": reads[k]} for k, v in sorted(values.items())
                          if k in reads and v != reads[k] and k not in SET_BY_PROBE}
    # the interpreter's own switches a rank's environment sets (a warnings filter of "error" turns any library's
    # warning into an exception)
    info["python_env"] = {k: v for k, v in sorted(values.items()) if k in INTERPRETER_ENV}
    emit(info)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
