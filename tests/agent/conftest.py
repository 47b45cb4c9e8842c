"""Fixtures for the agent tests: one real source + stand-in target per session (``workspace``), the prepare node
made fast (``fast_prepare``), and fresh inputs for the end-to-end tests (``migration_inputs``).

The prepare node runs for real (precheck, artifacts, similar-case ranking) but its three slow helpers (and the plan
node's two runtime probes) return results computed once per session, so a whole graph run with fake gates takes well under a second."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from msmigrate.core.tool_result import ToolResult


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> dict[str, Any]:
    """A real Qwen2-VL fixture folder, a git stand-in target, and the prepare helpers' real results (run once)."""
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.standin import write_standin
    from msmigrate.tools.repo_reader import hf_summary, target_inventory

    root = tmp_path_factory.mktemp("agent_ws")
    source = build_source("qwen2_vl", root / "source")
    target = write_standin(root / "target", with_assets=False)
    summary = hf_summary(source, runtime_python=sys.executable)
    inventory = target_inventory(target)
    assert summary.ok and inventory.ok, (summary.error, inventory.error)
    # The env probe only reports what the runtime has; its shape is all the prepare node reads.
    env = ToolResult.success(returncode=0, result={"python": sys.version.split()[0], "device": {"kind": "cpu"}})
    from msmigrate.tools.media_expansion import derive_media_expansion

    expansion = derive_media_expansion(sys.executable, source, source / "data" / "train.json")
    assert expansion.ok, expansion.error
    from msmigrate.tools.checkpoint_conversion import convert_checkpoint

    conversion = convert_checkpoint(sys.executable, source, root / "conversion_run")
    assert conversion.ok and not conversion.needed, conversion.error
    return {"root": root, "source": source, "target": target, "summary": summary, "inventory": inventory, "env": env,
            "expansion": expansion, "conversion": conversion}


@pytest.fixture
def migration_inputs(tmp_path_factory):
    """Factory for the end-to-end tests: ``migration_inputs(family)`` → (fresh fixture source folder, fresh git
    stand-in target). Fresh per call: a run commits its edits into the target."""

    def make(family: str) -> tuple[Path, Path]:
        from msmigrate.testbeds.fixtures import build_source
        from msmigrate.testbeds.standin import write_standin

        root = tmp_path_factory.mktemp(f"e2e_{family}")
        return build_source(family, root / family), write_standin(root / "MindSpeed-MM", with_assets=False)

    return make


@pytest.fixture
def fast_prepare(workspace, monkeypatch):
    import msmigrate.agent.nodes.prepare as prepare

    monkeypatch.setattr(prepare, "hf_summary", lambda *a, **k: workspace["summary"])
    monkeypatch.setattr(prepare, "target_inventory", lambda *a, **k: workspace["inventory"])
    monkeypatch.setattr(prepare, "run_probe", lambda *a, **k: workspace["env"])
    import msmigrate.agent.nodes.plan as plan

    monkeypatch.setattr(plan, "derive_media_expansion", lambda *a, **k: workspace["expansion"])
    monkeypatch.setattr(plan, "convert_checkpoint", lambda *a, **k: workspace["conversion"])
    return workspace


@pytest.fixture
def repairs_change_target(monkeypatch):
    """Every gate run sees a new target commit, as if each repair had edited something (the scripted policies of
    the routing tests edit nothing, so the identical-target rule would otherwise end their runs first)."""
    import itertools

    import msmigrate.agent.nodes.work as work

    commits = itertools.count()
    monkeypatch.setattr(work, "target_commit", lambda ctx: f"{next(commits):040d}")
