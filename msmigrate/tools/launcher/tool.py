"""LangChain wrapper of ``launch``: typed fields only — the model picks a gate, a YAML, overrides and a shape,
never a command line."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from msmigrate.core.tool_result import make_tool
from msmigrate.core.run_context import RunContext
from msmigrate.tools.launcher.command import LaunchSpec
from msmigrate.tools.launcher.device import DeviceInfo, detect_device
from msmigrate.tools.launcher.run import launch


# The gates that launch training. Only these names: the gate is part of the launch id and so of a path under the
# run directory, and nothing the model sends may become a path.
LaunchGate = Literal["G4", "G5", "G6"]


class LaunchArgs(BaseModel):
    gate: LaunchGate = Field(description="Gate this launch serves (G4, G5 or G6); part of the resumable launch key.")
    # not named `config`: LangChain reserves that argument name for its RunnableConfig and silently drops it
    config_yaml: str | None = Field(default=None, description="Base YAML, relative to the target root (trainer launch).")
    overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="YAML overrides merged into a per-run copy; nested dicts or dotted keys like "
        "'training.train_iters'. The trainer accepts no CLI overrides, so this is the only way.",
    )
    script: str | None = Field(
        default=None, description="Instead of the trainer: an existing examples/<m>/finetune_*.sh under the target."
    )
    nproc: int = Field(default=2, ge=1, le=64, description="Processes (ranks) per node.")
    device: str = Field(default="auto", description="auto | npu | cuda | cpu (cpu uses the gloo shim).")
    timeout_s: float = Field(default=1800.0, gt=0, description="Wall-clock limit; the whole process group is killed.")
    force: bool = Field(default=False, description="Relaunch even if an identical finished launch is recorded.")


def make_launch_tool(ctx: RunContext):
    detected: list[DeviceInfo] = []  # the runtime's devices do not change during a run: probe once

    def core(config_yaml: str | None = None, **kwargs: Any):
        spec = LaunchSpec(config=config_yaml, **kwargs)
        if spec.device != "cpu" and not detected:
            detected.append(detect_device(ctx.runtime_python, ctx.target))
        info = detected[0] if detected else None
        return launch(ctx, spec, device_info=info)

    return make_tool(
        "launch_training",
        "Run the target's training (torchrun on the plugin-route trainer, or an existing launch script) and return "
        "the parsed log summary: iterations, loss trend, finiteness, step time, and the failure signature.",
        LaunchArgs,
        core,
        # the launch's own limit, then the time to stop its process group and parse the log
        timeout_s=lambda kw: float(kw.get("timeout_s") or LaunchArgs.model_fields["timeout_s"].default) + 300.0,
    )
