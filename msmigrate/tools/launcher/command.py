"""What a launch runs: the per-run YAML and the argv/env of one allow-listed command shape.

The real trainer takes no dotted CLI overrides (contract §2.1 / §13 #35), so overrides are merged into a copy of the
YAML saved in the run directory. Commands are argv lists built here from typed fields; no shell string ever comes
from the model. The only shell involved is a fixed ``bash -c`` script (``SOURCE_THEN_EXEC``) that sources CANN's
``set_env.sh`` on NPU, where the file and the argv travel as positional arguments, never spliced into the script.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from msmigrate.tools.launcher.device import DeviceInfo
from msmigrate.tools.launcher.slurm_options import SlurmOptions
from msmigrate.tools.subprocess_env import NEVER

TRAINER_REL = "mindspeed_mm/fsdp/train/trainer.py"
CPU_SHIM = Path(__file__).resolve().parents[1] / "cpu_shim.py"
# The file is $1, the command the rest; positional parameters are cleared before sourcing so that set_env.sh
# scripts that inspect "$@" see none of the command.
SOURCE_THEN_EXEC = 'f="$1"; shift; cmd=("$@"); set --; source "$f" && exec "${cmd[@]}"'
# CPU runs: no flash-attn, no fused Adam (contract §10.1/§10.3); fp32 unless the spec keeps the YAML's dtypes.
# pin_memory: the real dataloader pins to get_device_type(); with pinning on, torchdata calls torch.cuda on a CPU host.
# enable_preload: the real preloading dataloader overlaps host-to-device copies on a device stream (none on CPU).
# preprocessing_num_workers: the real huggingface dataset maps samples with that many forked processes (16 in the
# examples); forked from a process holding torch threads, on a few CPU cores, that takes minutes per sample.
# num_workers: the batches come from the batch sampler in the trainer's process whatever the worker count (workers
# only run __getitem__ and the collator, each seeded with the same fixed seed); the training parity probes load
# them in-process too. Each worker is a fork of the trainer, model included (1.9 GB RSS each at real scale, 8 per
# rank in the examples), sharing the CPU cores the training step needs, and prefetches batches a gate launch never
# trains (8 workers x 2 for 5 iterations). So a CPU launch loads in-process; the delivered YAML keeps its count.
CPU_OVERRIDES: dict[str, Any] = {"model": {"attn_implementation": "sdpa"}, "training": {"adam_fused": False},
                                 "data": {"dataloader_param": {"pin_memory": False, "enable_preload": False,
                                                               "num_workers": 0},
                                          "dataset_param": {"basic_parameters": {"preprocessing_num_workers": None}}}}
# torch's DataLoader refuses these without workers; None is the framework's own "unset" for both
WORKER_ONLY_LOADER_KEYS = ("prefetch_factor", "persistent_workers")
CPU_FP32_OVERRIDES: dict[str, Any] = {"parallel": {"fsdp_plan": {"param_dtype": "fp32", "reduce_dtype": "fp32"}}}
# Launch-script environment of the plugin route (contract §11); the spec's env wins.
# What every launch of the trainer sets for the plugin (FSDP2) route: the target's packages read it on import
# (mindspeed_mm/__init__.py imports the Megatron patches unless NON_MEGATRON is "true"); G3 checks the delivered
# launch script exports the same (agent/launch_script_checks.py)
ROUTE_ENV = {"NON_MEGATRON": "true"}
NPU_ENV = {"HCCL_CONNECT_TIMEOUT": "1200", "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"}
# Variables that make bash, Python or the dynamic loader run extra code: never taken from a spec.
UNSAFE_ENV = tuple(sorted(NEVER))


@dataclass
class LaunchSpec:
    """One launch, as typed fields. ``config`` is relative to the target root (or absolute)."""

    gate: str  # e.g. "G4", "G6": part of the launch key
    config: str | None = None  # base YAML (trainer mode)
    overrides: dict[str, Any] = field(default_factory=dict)  # nested dict, or dotted keys ("training.train_iters")
    script: str | None = None  # run an existing examples/<m>/finetune_*.sh instead of the trainer
    nproc: int = 2
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int | None = None  # None: a free port
    device: str = "auto"  # auto | npu | cuda | cpu
    visible_devices: list[int] | None = None  # ASCEND_RT_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES
    cpu_fp32: bool = True  # on cpu, force fp32 param/reduce dtypes (bf16 matmuls are slow and lossy on CPU)
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 1800.0  # wall clock
    no_output_timeout_s: float = 600.0  # kill if nothing was printed for this long
    stop_on_fatal: bool = True  # stop early on OOM/exception/non-finite loss (after fatal_grace_s)
    fatal_grace_s: float = 20.0  # let torchrun print its summary before the group is killed
    force: bool = False  # relaunch even if an identical finished launch is recorded
    backend: str = "local"  # local: torchrun here | slurm: an sbatch job (node rank / master from the allocation)
    slurm: SlurmOptions | None = None  # backend slurm: partition, account, gres, time ... (default options if None)
    deadline: float | None = None  # epoch seconds; a scheduler job still pending/running then is cancelled (budget)


@dataclass
class Command:
    argv: list[str]
    env: dict[str, str]  # added to / overriding the inherited environment
    cwd: str
    config_path: str | None  # the per-run YAML actually used
    device: str


def expand_dotted(overrides: dict[str, Any]) -> dict[str, Any]:
    """{"training.train_iters": 5} -> {"training": {"train_iters": 5}}; nested dicts are expanded recursively."""
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        if isinstance(value, dict):
            value = expand_dotted(value)
        parts = str(key).split(".")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"override {key!r} conflicts with a scalar set at {part!r}")
        leaf = parts[-1]
        if isinstance(value, dict) and isinstance(node.get(leaf), dict):
            node[leaf] = deep_merge(node[leaf], value)
        else:
            node[leaf] = value
    return out


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with ``over`` merged in: dicts merge key by key, anything else replaces."""
    merged = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def materialize_config(base_yaml: Path, overrides: dict[str, Any], dest: Path) -> tuple[Path, str]:
    """Write ``base_yaml`` + overrides to ``dest``; returns (path, sha256 of the written text).

    Anchors/aliases of the base are resolved by loading (the written file has none), which also avoids the
    duplicate-anchor trap of contract §13 #36 in the per-run copy."""
    data = yaml.safe_load(base_yaml.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{base_yaml} is not a YAML mapping")
    merged = deep_merge(data, expand_dotted(overrides))
    text = yaml.safe_dump(merged, sort_keys=False, allow_unicode=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text)
    return dest, hashlib.sha256(text.encode()).hexdigest()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CPU_ATTENTION = ("eager", "sdpa")  # what runs on a CPU; flash-attention kernels need a device


def device_overrides(device: str, spec: LaunchSpec, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The overrides a launch on ``device`` needs over the YAML ``base``. On CPU an attention the YAML already asks
    for that runs there is kept: a class with no sdpa path (the draft chose eager for it) must not be given sdpa; the
    dataloader loads in-process (``num_workers: 0``), with the worker-only keys the YAML sets unset."""
    if device != "cpu":
        return {}
    over = deep_merge(CPU_OVERRIDES, CPU_FP32_OVERRIDES) if spec.cpu_fp32 else copy.deepcopy(CPU_OVERRIDES)
    model = (base or {}).get("model")
    if isinstance(model, dict) and model.get("attn_implementation") in CPU_ATTENTION:
        over["model"] = {k: v for k, v in over["model"].items() if k != "attn_implementation"}
    data = (base or {}).get("data")
    loader = data.get("dataloader_param") if isinstance(data, dict) else None
    if isinstance(loader, dict):
        over["data"]["dataloader_param"].update({k: None for k in WORKER_ONLY_LOADER_KEYS if loader.get(k) is not None})
    return over


def build_command(
    spec: LaunchSpec, device: str, info: DeviceInfo, *, target: Path, runtime_python: str, config_path: Path | None,
    port: int, rendezvous_from_env: bool = False,
) -> Command:
    """argv + env for one launch. Trainer mode: torchrun (via ``python -m torch.distributed.run`` of the runtime)
    on the trainer, through the CPU shim on cpu. Script mode: ``bash <script>`` with the distributed env set.

    ``rendezvous_from_env`` (scheduler backends): node rank, master address and port are left out of the command;
    the job sets them per node from its allocation (torchrun reads ``PET_NODE_RANK`` / ``PET_MASTER_ADDR`` /
    ``PET_MASTER_PORT`` for flags it is not given; launch scripts read ``NODE_RANK`` / ``MASTER_ADDR``)."""
    env = {**ROUTE_ENV, "PYTHONPATH": _pythonpath(target), "PYTHONUNBUFFERED": "1"}
    visible = ",".join(str(i) for i in (spec.visible_devices or range(spec.nproc)))
    if device == "npu":
        env.update(NPU_ENV)
        env["ASCEND_RT_VISIBLE_DEVICES"] = visible
    elif device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = visible
    else:
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // max(1, spec.nproc)))
    unsafe = [k for k in spec.env if k in UNSAFE_ENV or str(k).startswith("BASH_FUNC_")]
    if unsafe:
        raise ValueError(f"environment variables not allowed in a launch: {', '.join(sorted(unsafe))}")
    env.update({str(k): str(v) for k, v in spec.env.items()})
    if spec.script:
        env.update(NPUS_PER_NODE=str(spec.nproc), NNODES=str(spec.nnodes))
        if not rendezvous_from_env:
            env.update(NODE_RANK=str(spec.node_rank), MASTER_ADDR=spec.master_addr, MASTER_PORT=str(port))
        argv = ["bash", str(_inside(target, spec.script))]
    else:
        trainer = target / TRAINER_REL
        dist = [runtime_python, "-m", "torch.distributed.run", "--nproc_per_node", str(spec.nproc),
                "--nnodes", str(spec.nnodes)]
        if not rendezvous_from_env:
            dist += ["--node_rank", str(spec.node_rank), "--master_addr", spec.master_addr, "--master_port", str(port)]
        entry = [str(CPU_SHIM), str(trainer)] if device == "cpu" else [str(trainer)]
        argv = dist + entry + [str(config_path)]
    if device == "npu" and info.cann_set_env:
        for set_env in reversed(info.cann_set_env):  # toolkit first, then nnal/atb, as the launch scripts do
            argv = ["bash", "-c", SOURCE_THEN_EXEC, "msmigrate-launch", set_env, *argv]
    return Command(argv=argv, env=env, cwd=str(target), config_path=str(config_path) if config_path else None,
                   device=device)


def _inside(root: Path, rel: str) -> Path:
    """Resolve ``rel`` under ``root``; paths escaping the target are refused (the model chooses ``rel``)."""
    path = (root / rel).resolve()
    if root.resolve() not in path.parents and path != root.resolve():
        raise ValueError(f"{rel!r} is outside the target {root}")
    return path


def _pythonpath(target: Path) -> str:
    existing = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join([str(target)] + ([existing] if existing else []))


def launch_key(gate: str, config_sha: str | None, spec: LaunchSpec, device: str, target_state: str) -> str:
    """Deterministic key: same gate + same YAML + same code state + same shape => same key."""
    payload = {
        "gate": gate, "config_sha256": config_sha, "script": spec.script, "nproc": spec.nproc, "nnodes": spec.nnodes,
        "device": device, "target_state": target_state, "env": sorted(spec.env.items()),
    }
    if spec.backend != "local":  # local keys stay as they were, so existing journals still match
        payload["backend"] = spec.backend
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def default_runtime_python() -> str:
    return sys.executable
