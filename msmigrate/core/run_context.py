"""The run's facts every tool needs: where the source and target are, what may be edited, which Python runs the target."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

# Editable paths relative to the target root; ``{name}`` is the migrated model's short name (reference §11).
DEFAULT_EDITABLE = (
    "mindspeed_mm/fsdp/models/{name}/",
    "mindspeed_mm/fsdp/data/datasets/{name}/",
    "examples/{name}/",
)
# Registry files that data branch B may extend, additively only.
BRANCH_B_FILES = (
    "mindspeed_mm/fsdp/data/data_utils/func_utils/template.py",
    "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py",
    "mindspeed_mm/fsdp/data/dataloader/data_collator.py",
)


@dataclass
class RunContext:
    run_id: str
    run_dir: Path
    source: Path  # the source HF model folder / repo (read-only)
    target: Path  # where this run reads and edits the target: its own git worktree (tools/worktree.py)
    model_name: str  # short name used for plugin dirs and examples/<name>/
    runtime_python: str = sys.executable  # the target runtime's interpreter
    data_path: Path | None = None  # sample training data (ShareGPT JSON); defaults to <source>/data
    allow_branch_b: bool = True
    extra_editable: list[str] = field(default_factory=list)
    # paths the plan adds from evidence (a new Megatron component's module and the registry files it extends),
    # set from the run state at every tool call
    plan_editable: list[str] = field(default_factory=list)
    # the run's plan, set from the run state at every tool call: a check tool answers against what the plan
    # decided (the Megatron route's get_batch contract, converter, sizes), as the phase gate will
    plan: dict = field(default_factory=dict)
    checkout: Path | None = None  # the user's MindSpeed-MM checkout the worktree came from (never edited)
    approval: bool = False  # spec.approval: model-written code runs only once the user approved (G1 asks)
    code_approved: bool = False  # the user's answer, restored from the run state at every node visit
    probe_timeout_s: float = 300.0  # spec.launch.probe_timeout_s: wall-clock limit of one target-runtime probe

    @property
    def editable_paths(self) -> list[str]:
        paths = [p.format(name=self.model_name) for p in DEFAULT_EDITABLE] + list(self.extra_editable)
        paths += [p for p in self.plan_editable if p not in paths]
        if self.allow_branch_b:
            paths += list(BRANCH_B_FILES)
        return paths

    @property
    def work_branch(self) -> str:
        return f"msmigrate/{self.run_id}"
