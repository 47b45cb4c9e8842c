"""Run specification (one YAML per migration) and environment settings.

Precedence: explicit SPEC.yaml values > ``MSMIGRATE_*`` environment variables > defaults. Secrets (the API key) are
read from the environment only and never written to run artifacts.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from msmigrate.tools.launcher.slurm_options import SlurmOptions
from msmigrate.tools.source_step import resolve_ref

PolicyName = Literal["rules", "llm", "replay", "none"]  # none: gates only (msmigrate verify)
POLICY_NAMES: tuple[str, ...] = get_args(PolicyName)


def closest(word: str, valid: Iterable[str]) -> str:
    """' — did you mean 'X'?' for the nearest valid name, or the list of valid names when none is near."""
    valid = sorted(valid)
    near = difflib.get_close_matches(word, valid, n=1, cutoff=0.6)
    if not near and len(word) >= 3:  # a shortened name (nproc → nproc_per_node) is as near as a typo
        near = sorted((v for v in valid if v.startswith(word) or word in v), key=len)[:1]
    return f"did you mean {near[0]!r}?" if near else f"valid: {', '.join(valid)}"


def unknown_key_error(raw: Any, allowed: Iterable[str] | type[BaseModel], where: str) -> str | None:
    """The first key of a user mapping that is not a valid one (nested pydantic models are followed), as one line
    naming the key and the closest valid key; None when every key is known. For inputs that are not one pydantic
    model (a manifest entry, an eval task) and for partial specs (an eval task's spec overrides)."""
    if not isinstance(raw, Mapping):
        return None
    model = allowed if isinstance(allowed, type) and issubclass(allowed, BaseModel) else None
    names = list(model.model_fields) if model else list(allowed)
    for key, value in raw.items():
        if key not in names:
            return f"unknown key {key!r} in {where}; {closest(str(key), names)}"
        sub = model.model_fields[key].annotation if model else None
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            nested = unknown_key_error(value, sub, f"{where}.{key}")
            if nested:
                return nested
    return None


def explain(exc: ValidationError, model: type[BaseModel], where: str = "spec") -> str:
    """A pydantic error as one line a user can act on: every problem with its dotted key; an unknown key also gets
    the closest valid one (``budget`` → ``budgets``)."""
    parts = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        key = ".".join(loc) or where
        if err["type"] == "extra_forbidden":
            sub: Any = model
            for p in loc[:-1]:
                field = sub.model_fields.get(p) if isinstance(sub, type) and issubclass(sub, BaseModel) else None
                sub = field.annotation if field else None
            valid = list(sub.model_fields) if isinstance(sub, type) and issubclass(sub, BaseModel) else []
            parts.append(f"unknown key {key!r} in {where}; {closest(loc[-1], valid)}")
        else:
            got = err.get("input")
            shown = "" if isinstance(got, (dict, list)) or got is None else f" (got {got!r})"
            parts.append(f"{key}: {err['msg']}{shown}")
    return "; ".join(parts)


class _UserInput(BaseModel):
    """What a user writes: a misspelt key is an error naming it, never silently ignored."""

    model_config = ConfigDict(extra="forbid")


class Settings(BaseSettings):
    """Environment configuration (``MSMIGRATE_`` prefix)."""

    model_config = SettingsConfigDict(env_prefix="MSMIGRATE_", extra="ignore")

    llm_base_url: str = Field("http://127.0.0.1:8000/v1", description="OpenAI-compatible endpoint (vLLM, Ollama, hosted)")
    llm_model: str = Field("qwen2.5-coder-32b-instruct", description="model name served at the endpoint")
    llm_api_key: str = Field("EMPTY", description="API key; also read from OPENAI_API_KEY when this is unset")
    runs_dir: Path = Field(Path("runs"), description="where runs/<run_id>/ folders go")
    runtime_python: str = Field(sys.executable, description="the target runtime's Python interpreter")


class LLMSettings(_UserInput):
    base_url: str | None = Field(None, description="overrides MSMIGRATE_LLM_BASE_URL")
    model: str | None = Field(None, description="overrides MSMIGRATE_LLM_MODEL")
    temperature: float = 0.0
    max_transport_retries: int = Field(4, ge=0, description="retries with backoff on transport errors only")
    max_format_retries: int = Field(3, ge=0, description="malformed tool calls tolerated per phase step")
    prompt_budget_tokens: int = Field(16000, ge=2000, description="a request (system and phase prompt, tool schemas, "
                                                                  "history) over this cuts old tool outputs, oldest "
                                                                  "first")
    timeout_s: float = 120.0


class Budgets(_UserInput):
    phase_attempts: int = Field(4, ge=1, description="gate failures tolerated per phase before the run stops")
    policy_steps: int = Field(120, ge=1, description="policy decisions over the whole run")
    wall_seconds: float = Field(3600.0, gt=0)
    tokens: int = Field(2_000_000, ge=0, description="LLM tokens (prompt + completion) over the whole run")
    launches: int = Field(16, ge=1, description="training launches (G4–G6) over the whole run")


class LaunchSettings(_UserInput):
    backend: Literal["local", "slurm"] = Field(
        "local", description="local: torchrun on this host; slurm: each gate launch is an sbatch job (launch.slurm)")
    slurm: SlurmOptions = Field(default_factory=SlurmOptions, description="partition, account, gres, time … (slurm)")
    device: Literal["auto", "npu", "cuda", "cpu"] = "auto"
    nproc_per_node: int = Field(2, ge=1)
    nnodes: int = Field(1, ge=1)
    node_rank: int = Field(0, ge=0)
    master_addr: str = "127.0.0.1"
    gate_train_iters: int = Field(6, ge=5, description="iterations each gate launch runs (a gate bound, not the config's)")
    parity_steps: int = Field(20, ge=2, description="optimizer steps G4's training parity runs, source vs migrated "
                                                   "model (fp32, CPU, one process)")
    parity_dtype: Literal["fp32", "bf16"] = Field(
        "fp32", description="compute dtype of both sides of the training parity: bf16 as the delivered FSDP2 plan "
                            "on NPU (fp32 master weights; wider tolerances, probes/_precision.py)")
    timeout_s: float = Field(900.0, gt=0)
    no_output_timeout_s: float = Field(300.0, gt=0)
    probe_timeout_s: float = Field(300.0, gt=0, description="seconds one runtime probe (G1–G3 checks: module tree, "
                                   "forward smoke, data check, parity; processor and media probes) may run; raise it "
                                   "for real-size sources on a slow or loaded host")

    def with_edits(self, edits: dict[str, Any]) -> "LaunchSettings":
        """A validated copy with ``edits`` applied; keys are field names or ``slurm.<field>`` (chat approval edits).
        Raises ValueError (pydantic's ValidationError is one) on an unknown key or a value the field refuses."""
        data = self.model_dump()
        for key, value in edits.items():
            head, _, sub = str(key).partition(".")
            if head not in data or (sub and head != "slurm") or (head == "slurm" and not sub):
                raise ValueError(f"unknown launch setting {key!r}")
            if sub:
                if sub not in data["slurm"]:
                    raise ValueError(f"unknown launch setting {key!r}")
                data["slurm"][sub] = value
            else:
                data[head] = value
        return LaunchSettings.model_validate(data)


def launch_edit_error(current: Mapping[str, Any], edits: Mapping[str, Any]) -> str | None:
    """Why ``edits`` over the ``current`` launch settings are not valid launch settings (one line), or None."""
    try:
        LaunchSettings.model_validate(dict(current)).with_edits(dict(edits))
    except ValidationError as exc:
        return "edit refused: " + explain(exc, LaunchSettings, "launch")
    except ValueError as exc:  # a key with_edits does not know
        return f"edit refused: {exc}"
    return None


class ParallelismSpec(_UserInput):
    """Model-parallel sizes the user needs; any of tp / pp > 1 needs the Megatron backend route."""

    tp: int = Field(1, ge=1, description="tensor-parallel size (attention heads and KV heads split over it)")
    pp: int = Field(1, ge=1, description="pipeline-parallel size (layers split over pp x vpp stages)")
    cp: int = Field(1, ge=1, description="context-parallel size (sequence split)")
    vpp: int = Field(1, ge=1, description="virtual pipeline stages per pipeline rank")


class RunSpec(_UserInput):
    """What to migrate and how. Paths are resolved relative to the spec file."""

    source: Path = Field(description="HF model folder or repo with the model's code")
    target: Path = Field(description="MindSpeed-MM checkout (real or stand-in)")
    model_name: str = Field(description="short name: plugin dir and examples/<name>/")
    data: Path | None = Field(None, description="ShareGPT JSON of sample training data; default <source>/data/train.json")
    runtime_python: str | None = Field(None, description="target runtime interpreter; default MSMIGRATE_RUNTIME_PYTHON")
    policy: PolicyName = "rules"
    replay_trajectory: Path | None = Field(None, description="trajectory.jsonl to replay (policy: replay)")
    llm: LLMSettings = Field(default_factory=LLMSettings)
    budgets: Budgets = Field(default_factory=Budgets)
    launch: LaunchSettings = Field(default_factory=LaunchSettings)
    approval: bool = Field(False, description="ask before accelerator launches and out-of-scope edits")
    allow_branch_b: bool = Field(True, description="allow additive edits to template/mm_plugin/collator registries")
    extra_editable: list[str] = Field(default_factory=list)
    env_passthrough: list[str] = Field(default_factory=list, description="extra environment variables (names or "
                                       "PREFIX_*) the target runtime's processes may see; all others are dropped")
    instructions: str = Field("", description="free-text guidance passed to the policy")
    # An existing migration whose names do not follow model_name (the real models/qwen3vl registers qwen3_vl_moe,
    # its YAML is qwen3vl_30B_config_v1.yaml): each field, when set, replaces what the plan would derive.
    model_id: str | None = Field(None, description="model_register id of the plugin class; default model_name")
    plugin_dir: str | None = Field(None, description="plugin package, relative to the target root; default "
                                   "mindspeed_mm/fsdp/models/<model_name>")
    config: str | None = Field(None, description="plugin-route YAML, relative to the target root; default "
                               "examples/<model_name>/<model_name>_config.yaml")
    launch_script: str | None = Field(None, description="launch script running that YAML, relative to the target "
                                      "root; default examples/<model_name>/finetune_<model_name>.sh")
    backend: Literal["auto", "fsdp2", "megatron"] = Field(
        "auto", description="training backend route: auto chooses from parallelism; fsdp2 or megatron forces it")
    parallelism: ParallelismSpec | None = Field(None, description="model-parallel sizes the user needs")
    bind_inputs: bool | None = Field(None, description="gates read the config with its model/data paths rebound to "
                                     "this spec's source and data (default: on for verify, off for run)")
    source_step: str | None = Field(None, description="FILE.py:function, your source's own training step (its "
                                    "forward and loss on one batch) for G4's training parity, where the source has "
                                    "no loss or training code of its own; the file is relative to the spec")

    @field_validator("model_name")
    @classmethod
    def _name_is_safe(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]{1,39}", v):
            raise ValueError("model_name must be lower-case letters, digits and '_' (2-40 chars), starting with a letter")
        return v

    @classmethod
    def load(cls, path: Path) -> "RunSpec":
        """Raises ValueError with one line a user can act on (an unreadable file, bad YAML, an unknown key, a key
        given twice, a file far larger than a spec …); OSError when it cannot be opened."""
        from msmigrate.agent.user_yaml import load_user_yaml_file

        raw = load_user_yaml_file(path, "spec")
        return cls.from_dict({} if raw is None else raw, Path(path).parent)

    @classmethod
    def from_dict(cls, raw: Any, base: Path, where: str = "spec") -> "RunSpec":
        if not isinstance(raw, Mapping):
            raise ValueError(f"{where} must be a mapping of keys (source, target, model_name …)")
        try:
            spec = cls.model_validate(raw)
        except ValidationError as exc:
            raise ValueError(explain(exc, cls, where)) from None
        return spec.resolved(base)

    def resolved(self, base: Path) -> "RunSpec":
        def fix(p: Path | None) -> Path | None:
            return None if p is None else (p if p.is_absolute() else (base / p)).resolve()

        return self.model_copy(
            update={"source": fix(self.source), "target": fix(self.target), "data": fix(self.data),
                    "replay_trajectory": fix(self.replay_trajectory),
                    "source_step": resolve_ref(self.source_step, base)}
        )
