"""Snapshots of what a change to the wiring or the tool surface alters: the graph topology and the tool schemas
offered to the policy. Regenerate on purpose with  UPDATE_SNAPSHOTS=1 pytest tests/agent  and review the diff of
tests/agent/snapshots/ like code."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from msmigrate.agent.config import RunSpec
from msmigrate.agent.deps import RunDeps
from msmigrate.agent.graph import NODES, build_graph
from msmigrate.agent.runner import build_tools
from msmigrate.agent.trajectory import Trajectory
from msmigrate.core.run_context import RunContext

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("UPDATE_SNAPSHOTS") == "1"


def check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no snapshot {name}; run UPDATE_SNAPSHOTS=1 pytest tests/agent"
    assert text == path.read_text(encoding="utf-8"), (
        f"{name} changed; if intended, run UPDATE_SNAPSHOTS=1 pytest tests/agent and review the diff")


@pytest.fixture
def ctx(tmp_path) -> RunContext:
    # Fixed paths: nothing of the machine may leak into the snapshots.
    return RunContext(run_id="snap", run_dir=tmp_path / "run", source=Path("/src"), target=Path("/tgt"),
                      model_name="snapvl", runtime_python=sys.executable, data_path=Path("/src/data/train.json"))


def test_graph_topology_matches_snapshot(ctx):
    spec = RunSpec(source=ctx.source, target=ctx.target, model_name=ctx.model_name)
    deps = RunDeps(ctx=ctx, spec=spec, policy=None, tools=[], gates={}, trajectory=Trajectory(ctx.run_dir / "t.jsonl"))
    graph = build_graph(deps).get_graph()
    assert set(NODES) <= set(graph.nodes)
    check_snapshot("graph.mmd", graph.draw_mermaid())


def tool_schemas(tools) -> list[dict]:
    return [{"name": t.name, "description": t.description, "args": t.tool_call_schema.model_json_schema()}
            for t in tools]


def test_tool_schemas_match_snapshot(ctx):
    tools = build_tools(ctx)
    names = [t.name for t in tools]
    assert len(names) == len(set(names)), "tool names must be unique"
    schemas = tool_schemas(tools)
    for s in schemas:  # every argument is described for the model
        assert s["description"].strip(), s["name"]
        for arg, prop in s["args"].get("properties", {}).items():
            assert prop.get("description"), f"{s['name']}.{arg} has no description"
    text = json.dumps(schemas, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    assert "/tgt" not in text and "/src" not in text, "tool schemas must not depend on the run's paths"
    check_snapshot("tool_schemas.json", text)


def test_no_orphan_snapshots():
    assert {p.name for p in SNAPSHOTS.iterdir()} == {"graph.mmd", "tool_schemas.json"}
