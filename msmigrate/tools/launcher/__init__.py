"""Training launcher (NPU / CUDA / CPU preflight): device detection, per-run YAML, allow-listed torchrun command,
streamed + watched run in its own process group (local backend) or an sbatch job (Slurm backend), and a resumable
launch journal."""

from msmigrate.tools.launcher.command import (
    Command, LaunchSpec, build_command, deep_merge, expand_dotted, launch_key, materialize_config,
)
from msmigrate.tools.launcher.device import DeviceInfo, detect_device, resolve_device
from msmigrate.tools.launcher.records import (
    LaunchRecord, find_finished_launch, interrupted_launches, mask_env, read_launches,
)
from msmigrate.tools.launcher.run import BACKENDS, launch, reap_interrupted
from msmigrate.tools.launcher.slurm_options import SlurmOptions
from msmigrate.tools.launcher.tool import LaunchArgs, make_launch_tool

__all__ = [
    "BACKENDS", "SlurmOptions", "Command", "DeviceInfo", "LaunchArgs", "make_launch_tool", "LaunchRecord", "LaunchSpec", "build_command", "deep_merge", "detect_device",
    "expand_dotted", "find_finished_launch", "interrupted_launches", "launch", "launch_key", "mask_env",
    "materialize_config", "read_launches", "reap_interrupted", "resolve_device",
]
