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


def replay(rec: dict[str, Any], work: Path, run_id: str, prompt_budget: int | None = None) -> dict[str, Any]:
    """Run the recording's fixture into a fresh stand-in under ``work`` with the recorded answers as the model."""
    from msmigrate.agent.config import LaunchSettings, LLMSettings, RunSpec, Settings
    from msmigrate.agent.runner import Run
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.standin import write_standin

    source = build_source(rec["fixture"], work / "source")
    target = write_standin(work / "target")
    run_dir = work / "runs" / run_id
    paths = {"run": str(run_dir), "source": str(source), "target": str(target)}
    llm = {"prompt_budget_tokens": prompt_budget} if prompt_budget else {}
    with ScriptedChatServer(bound(rec["script"], paths), classify_reply=bound(rec["classify"], paths) or "model") \
            as server:
        spec = RunSpec(source=source, target=target, model_name=rec["fixture"], policy="llm",
                       llm=LLMSettings(base_url=server.base_url, model="recorded", timeout_s=60, **llm),
                       launch=LaunchSettings(gate_train_iters=5))
        run = Run(spec, run_id, Settings(runs_dir=work / "runs", llm_api_key="sk-test"))
        try:
            final = run.drive()
        finally:
            run.close()
    return {"rec": rec, "final": final, "server": server, "run_dir": run_dir, "target": target, "run_id": run_id,
            "prompt_budget": spec.llm.prompt_budget_tokens}
