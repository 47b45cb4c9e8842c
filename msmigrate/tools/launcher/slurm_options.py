"""Slurm settings of a launch (``launch.slurm`` in the run spec), each value checked against the syntax Slurm accepts.

The values reach ``sbatch`` as argv entries (never a shell string) and the job script only through ``shlex.quote``;
the patterns below are a second wall: a value that is not a plausible partition name, GRES spec or time limit is
refused at spec / chat-edit time with a message, instead of being handed to the scheduler."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Names of partitions, accounts, QOS: letters, digits and ._+- (Slurm allows more, clusters use these).
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")
# GRES: name[:type]:count, comma-separated — "npu:8", "gpu:a100:4", "gpu:2,mps:100".
GRES_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*(:[A-Za-z0-9_.-]+){0,2}(,[A-Za-z][A-Za-z0-9_]*(:[A-Za-z0-9_.-]+){0,2})*")
# Slurm time limits: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or UNLIMITED / INFINITE.
TIME_RE = re.compile(r"\d{1,7}(:\d{1,2}){0,2}|\d{1,4}-\d{1,2}(:\d{1,2}){0,2}|UNLIMITED|INFINITE")
MEM_RE = re.compile(r"\d{1,9}[KMGT]?")
# Node features: names joined by & | , with optional [..] / counts (``--constraint``).
CONSTRAINT_RE = re.compile(r"[A-Za-z0-9_.&|,:*\[\]()-]{1,256}")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# CANN's set_env.sh files, sourced on the allocated node when they exist there (toolkit first, then nnal/atb).
DEFAULT_CANN_SET_ENV = ("/usr/local/Ascend/ascend-toolkit/set_env.sh", "/usr/local/Ascend/nnal/atb/set_env.sh")


HINTS = {
    NAME_RE: "letters, digits and ._+- only", GRES_RE: "name[:type]:count, e.g. npu:8 or gpu:a100:4",
    TIME_RE: "minutes, HH:MM:SS, D-HH:MM:SS or UNLIMITED", MEM_RE: "a size such as 256G",
    CONSTRAINT_RE: "feature names joined by & | , (no spaces)", ENV_NAME_RE: "letters, digits and _",
}


# The one-value fields and the syntax each must have (partition is a comma-separated list of names).
FIELD_PATTERNS = {"account": NAME_RE, "qos": NAME_RE, "gres": GRES_RE, "time": TIME_RE, "mem": MEM_RE,
                  "constraint": CONSTRAINT_RE}


def _check(pattern: re.Pattern[str], what: str, value: str | None) -> str | None:
    if value is not None and not pattern.fullmatch(value):
        raise ValueError(f"{what} {value!r} is not valid ({HINTS[pattern]})")
    return value


class SlurmOptions(BaseModel):
    """What the Slurm backend asks the scheduler for. Node count is ``launch.nnodes``; node rank and master address
    come from the allocation, so ``launch.node_rank`` / ``master_addr`` are not used with this backend."""

    model_config = ConfigDict(extra="forbid")

    partition: str | None = Field(None, description="--partition (comma-separated list allowed)")
    account: str | None = Field(None, description="--account")
    qos: str | None = Field(None, description="--qos")
    gres: str | None = Field(None, description="--gres per node, e.g. 'npu:8' or 'gpu:4'")
    time: str | None = Field(None, description="--time limit; default: the launch timeout plus a minute")
    cpus_per_task: int | None = Field(None, ge=1, le=4096, description="--cpus-per-task (one task per node)")
    mem: str | None = Field(None, description="--mem per node, e.g. '256G'")
    constraint: str | None = Field(None, description="--constraint (node features)")
    exclusive: bool = Field(False, description="--exclusive: whole nodes")
    cann_set_env: list[str] = Field(default_factory=lambda: list(DEFAULT_CANN_SET_ENV),
                                    description="set_env.sh files sourced on the node when present (NPU launches)")
    env: dict[str, str] = Field(default_factory=dict,
                                description="extra variables for the job, e.g. HCCL_SOCKET_IFNAME / HCCL_IF_IP")
    poll_s: float = Field(2.0, gt=0, le=60, description="how often the job state and log are read")
    queue_timeout_s: float = Field(3600.0, gt=0, description="cancel a job still pending after this long")
    stop_grace_s: float = Field(60.0, ge=0, le=3600, description="after the user stops the run, how long the running "
                                "job may go on before it is cancelled")

    @field_validator("partition")
    @classmethod
    def _partition(cls, v: str | None) -> str | None:
        for part in (v.split(",") if v is not None else []):
            _check(NAME_RE, "partition", part)
        return v

    @field_validator(*FIELD_PATTERNS)
    @classmethod
    def _syntax(cls, v: str | None, info) -> str | None:
        return _check(FIELD_PATTERNS[info.field_name], info.field_name, v)

    @field_validator("cann_set_env")
    @classmethod
    def _set_env(cls, v: list[str]) -> list[str]:
        for path in v:
            if not path.startswith("/") or any(c in path for c in "\0\n\r"):
                raise ValueError(f"cann_set_env entries must be absolute paths on one line, got {path!r}")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for name, value in v.items():
            _check(ENV_NAME_RE, "environment variable name", name)
            if "\0" in str(value):
                raise ValueError(f"environment variable {name} contains a NUL byte")
        return {k: str(val) for k, val in v.items()}
