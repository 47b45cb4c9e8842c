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


def green_for_faults(root: Path) -> dict[str, Any]:
    """A green migration checked out at the run's commit for fault injection (tests/agent/test_heldout*_faults.py):
    its target, its source, and where the run put its plugin, model module, YAML and launch script."""
    migrated = migrate_qwen2_vl(root, {})
    target = migrated["target"]
    subprocess.run(["git", "-C", str(target), "checkout", "-q", "-f", migrated["head"]], check=True)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(target), *args], capture_output=True, text=True, check=True).stdout

    base = git("rev-list", "--max-parents=0", "HEAD").split()[0]  # the stand-in before the run
    added = git("diff", "--name-only", base, "HEAD").split()
    plugin_files = [p for p in added if p.endswith(".py") and "/models/" in p]
    return {"target": target, "source": migrated["source"],
            "plugin": str(Path(plugin_files[0]).parent),
            "modeling": next(p for p in plugin_files if not p.endswith("__init__.py")),
            "config": next(p for p in added if p.endswith(".yaml")),
            "launch": next(p for p in added if p.endswith(".sh"))}


def fault_copy(green: dict[str, Any], folder: Path):
    """A copy of ``green_for_faults``'s target and source under ``folder``, as the Layout a fault is applied to."""
    from msmigrate.testbeds.faults import Layout

    target, source = folder / "target", folder / "source"
    shutil.copytree(green["target"], target, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    shutil.copytree(green["source"], source, symlinks=True)
    return Layout(root=target, plugin=green["plugin"], modeling=green["modeling"], config=green["config"],
                  launch=green["launch"], data=source / "data" / "train.json")


def apply_fault_checked(fault, layout, json_kept: bool = True) -> dict[Path, str]:
    """Apply ``fault`` to ``layout`` and check that it changed every file it names into a wrong program, not a
    broken file: Python that compiles, YAML that parses to other values, a shell script bash parses, and (unless
    ``json_kept`` is False: a records fault that breaks the file's format) JSON that parses to other values.
    Returns the files' texts before the fault."""
    import json

    import yaml

    from msmigrate.testbeds.faults import apply

    files = {layout.path(e.file) for e in fault.edits}
    before = {p: p.read_text(encoding="utf-8") for p in files}
    changed = apply(fault, layout)  # raises FaultError when an anchor is not in the green migration
    assert set(changed) == files
    for path in files:
        after = path.read_text(encoding="utf-8")
        assert after != before[path], f"{fault.id} left {path.name} as it was"
        if path.suffix == ".py":
            compile(after, str(path), "exec")
        elif path.suffix == ".yaml":
            assert yaml.safe_load(after) != yaml.safe_load(before[path])
        elif path.suffix == ".sh":
            assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
        elif path.suffix == ".json" and json_kept:
            assert json.loads(after) != json.loads(before[path])
    return before
