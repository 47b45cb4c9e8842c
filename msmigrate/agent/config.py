"""Run specification (one YAML per migration) and environment settings.

Precedence: explicit SPEC.yaml values > ``MSMIGRATE_*`` environment variables > defaults. Secrets (the API key) are
read from the environment only and never written to run artifacts.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from msmigrate.tools.launcher.slurm_options import SlurmOptions

PolicyName = Literal["rules", "llm", "replay", "none"]  # none: gates only (msmigrate verify)


class Settings(BaseSettings):
    """Environment configuration (``MSMIGRATE_`` prefix)."""

    model_config = SettingsConfigDict(env_prefix="MSMIGRATE_", extra="ignore")

    llm_base_url: str = Field("http://127.0.0.1:8000/v1", description="OpenAI-compatible endpoint (vLLM, Ollama, hosted)")
    llm_model: str = Field("qwen2.5-coder-32b-instruct", description="model name served at the endpoint")
    llm_api_key: str = Field("EMPTY", description="API key; also read from OPENAI_API_KEY when this is unset")
    runs_dir: Path = Field(Path("runs"), description="where runs/<run_id>/ folders go")
    runtime_python: str = Field(sys.executable, description="the target runtime's Python interpreter")


class LLMSettings(BaseModel):
    base_url: str | None = Field(None, description="overrides MSMIGRATE_LLM_BASE_URL")
    model: str | None = Field(None, description="overrides MSMIGRATE_LLM_MODEL")
    temperature: float = 0.0
    max_transport_retries: int = Field(4, ge=0, description="retries with backoff on transport errors only")
    max_format_retries: int = Field(3, ge=0, description="malformed tool calls tolerated per phase step")
    prompt_budget_tokens: int = Field(24000, ge=2000, description="old tool outputs are truncated to stay under this")
    timeout_s: float = 120.0


class Budgets(BaseModel):
    phase_attempts: int = Field(4, ge=1, description="gate failures tolerated per phase before the run stops")
    policy_steps: int = Field(120, ge=1, description="policy decisions over the whole run")
    wall_seconds: float = Field(3600.0, gt=0)
    tokens: int = Field(2_000_000, ge=0, description="LLM tokens (prompt + completion) over the whole run")
    launches: int = Field(16, ge=1, description="training launches (G4–G6) over the whole run")


class LaunchSettings(BaseModel):
    backend: Literal["local", "slurm"] = Field(
        "local", description="local: torchrun on this host; slurm: each gate launch is an sbatch job (launch.slurm)")
    slurm: SlurmOptions = Field(default_factory=SlurmOptions, description="partition, account, gres, time … (slurm)")
    device: Literal["auto", "npu", "cuda", "cpu"] = "auto"
    nproc_per_node: int = Field(2, ge=1)
    nnodes: int = Field(1, ge=1)
    node_rank: int = Field(0, ge=0)
    master_addr: str = "127.0.0.1"
    gate_train_iters: int = Field(6, ge=5, description="iterations each gate launch runs (a gate bound, not the config's)")
    timeout_s: float = Field(900.0, gt=0)
    no_output_timeout_s: float = Field(300.0, gt=0)

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


class RunSpec(BaseModel):
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
    instructions: str = Field("", description="free-text guidance passed to the policy")

    @field_validator("model_name")
    @classmethod
    def _name_is_safe(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]{1,39}", v):
            raise ValueError("model_name must be lower-case letters, digits and '_' (2-40 chars), starting with a letter")
        return v

    @classmethod
    def load(cls, path: Path) -> "RunSpec":
        raw = yaml.safe_load(Path(path).read_text()) or {}
        spec = cls.model_validate(raw)
        return spec.resolved(Path(path).parent)

    def resolved(self, base: Path) -> "RunSpec":
        def fix(p: Path | None) -> Path | None:
            return None if p is None else (p if p.is_absolute() else (base / p)).resolve()

        return self.model_copy(
            update={"source": fix(self.source), "target": fix(self.target), "data": fix(self.data),
                    "replay_trajectory": fix(self.replay_trajectory)}
        )
