"""One green rules migration of the qwen2_vl fixture on a stand-in target (G0–G3 approved, the launch rejected),
and copies of it at the run's commit for mutation tests (tests/agent/test_parity_gates.py,
tests/agent/test_training_parity.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.runner import Run, new_run_id
from msmigrate.core.run_context import RunContext


def migrate_qwen2_vl(root: Path, launch: dict[str, Any]) -> dict[str, Any]:
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.standin import write_standin

    source = build_source("qwen2_vl", root / "qwen2_vl")
    target = write_standin(root / "MindSpeed-MM", with_assets=False)
    spec = RunSpec(source=source, target=target, model_name="qwen2_vl", policy="rules", approval=True, launch=launch)
    run = Run(spec, new_run_id("qwen2_vl"), Settings(runs_dir=root / "runs"))
    # approve running the written code (G1–G3), reject the training launch: the run ends before any torchrun
    state = run.drive(lambda payload: {"action": "reject" if payload.get("kind") == "launch" else "approve"})
    run.close()
    for gate in ("G1", "G2", "G3"):
        assert state["gates"][gate]["passed"], (gate, state["gates"][gate]["summary"])
    head = subprocess.run(["git", "-C", str(target), "rev-parse", f"msmigrate/{run.run_id}"], capture_output=True,
                          text=True, check=True).stdout.strip()
    return {"source": source, "target": target, "state": state, "spec": spec, "head": head, "root": root}


def copy_at_head(migrated: dict[str, Any], name: str) -> tuple[SimpleNamespace, dict]:
    """A copy of the migrated target at the run's last commit, and gate deps/state pointing at it."""
    dest = migrated["root"] / f"mut_{name}"
    shutil.copytree(migrated["target"], dest, symlinks=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", "-f", migrated["head"]], check=True)
    ctx = RunContext(run_id=f"mut-{name}", run_dir=migrated["root"] / f"run_{name}", source=migrated["source"],
                     target=dest, model_name="qwen2_vl", data_path=migrated["source"] / "data" / "train.json")
    return SimpleNamespace(ctx=ctx, spec=migrated["spec"]), {"plan": migrated["state"]["plan"]}


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"mutation anchor {old!r} not in {path}"
    path.write_text(text.replace(old, new))
