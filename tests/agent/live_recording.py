"""Recordings of live LLM runs (scripts/relay_to_script.py writes them to tests/agent/recordings/): the paths a
recording holds as placeholders, bound to a replay's fresh copies, and the replay itself: the recorded answers
served over real HTTP by fake_openai_server.py to the LLM policy of a run into a fresh stand-in. Used by
test_llm_recorded_http.py and benchmarks/bench_llm_run.py --recording."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_openai_server import ScriptedChatServer


def bound(value: Any, paths: dict[str, str]) -> Any:
    """The recording's <<SOURCE>> / <<TARGET>> / <<RUN>> placeholders, pointed at this test's copies."""
    if isinstance(value, str):
        for key, path in paths.items():
            value = value.replace(f"<<{key.upper()}>>", path)
        return value
    if isinstance(value, list):
        return [bound(v, paths) for v in value]
    if isinstance(value, dict):
        return {k: bound(v, paths) for k, v in value.items()}
    return value


def outcomes(run_dir: Path) -> tuple[list[dict[str, Any]], list[list[Any]], list[list[Any]]]:
    """A run's trajectory records, and what a recording's ``outcomes`` compares: [phase, tool, ok] per tool call
    and [gate, passed, tool calls before it] per gate verdict."""
    import json

    records = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    tools: list[list[Any]] = []
    gates: list[list[Any]] = []
    for r in records:
        if r["kind"] == "tool":
            tools.append([r.get("phase"), r.get("name"), str(r.get("result", "")).startswith('{"ok": true')])
        elif r["kind"] == "gate":
            gates.append([r.get("gate"), bool(r.get("passed")), len(tools)])
    return records, tools, gates


def replay(rec: dict[str, Any], work: Path, run_id: str, prompt_budget: int | None = None, *,
           source: Path | None = None, target: Path | None = None, runtime_python: str | None = None,
           gate_train_iters: int = 5, spec_extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run the recording's fixture into a fresh stand-in under ``work`` with the recorded answers as the model; or,
    given ``source``/``target``/``runtime_python``, into that target (a real MindSpeed-MM checkout and its runtime,
    the source written by that runtime): the recorded answers are served by phase, attempt and turn, whatever the
    target's tools answer, so a target other than the recorded one shows where the recorded play stops fitting.
    ``spec_extra``: more RunSpec fields (a ``source_step``, absolute)."""
    from msmigrate.agent.config import LaunchSettings, LLMSettings, RunSpec, Settings
    from msmigrate.agent.runner import Run
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.standin import write_standin

    source = source or build_source(rec["fixture"], work / "source")
    target = target or write_standin(work / "target")
    run_dir = work / "runs" / run_id
    paths = {"run": str(run_dir), "source": str(source), "target": str(target)}
    llm = {"prompt_budget_tokens": prompt_budget} if prompt_budget else {}
    with ScriptedChatServer(bound(rec["script"], paths), classify_reply=bound(rec["classify"], paths) or "model") \
            as server:
        spec = RunSpec(source=source, target=target, model_name=rec["fixture"], policy="llm",
                       runtime_python=runtime_python,
                       llm=LLMSettings(base_url=server.base_url, model="recorded", timeout_s=60, **llm),
                       launch=LaunchSettings(gate_train_iters=gate_train_iters), **(spec_extra or {}))
        run = Run(spec, run_id, Settings(runs_dir=work / "runs", llm_api_key="sk-test"))
        try:
            final = run.drive()
        finally:
            run.close()
    return {"rec": rec, "final": final, "server": server, "run_dir": run_dir, "target": target, "run_id": run_id,
            "prompt_budget": spec.llm.prompt_budget_tokens}
