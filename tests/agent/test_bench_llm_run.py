"""benchmarks/bench_llm_run.py reads an LLM run's size off its trajectory: decisions per phase, tool calls, and the
classify node's LLM verdicts as a row of their own."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_llm_run.py"


def test_summary_counts_decisions_tools_and_llm_verdicts(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_llm_run", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    records = [
        {"kind": "decision", "phase": "model", "policy": "llm", "requests": 2, "prompt_chars": 900, "tokens": 300},
        {"kind": "tool", "phase": "model", "name": "read_file"},
        {"kind": "tool", "phase": "model", "name": "finish_phase"},
        {"kind": "decision", "phase": "model", "policy": "llm", "requests": 1, "prompt_chars": 1200, "tokens": 400,
         "tool_schema_chars": 350},
        {"kind": "classify", "method": "llm", "requests": 1, "prompt_chars": 500, "tokens": 150},
        {"kind": "classify", "method": "catalog"},  # a catalog verdict asks no LLM
        {"kind": "decision", "phase": "data", "policy": "rules", "tokens": 0},  # not the LLM's
    ]
    path = tmp_path / "trajectory.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    rows = bench.summarize(path)
    assert rows["model"] == {"requests": 3, "prompt_chars": 2100, "max_prompt_chars": 1200, "tokens": 700,
                             "tool_calls": 2, "schema_chars": 350}
    assert rows["classify"] == {"requests": 1, "prompt_chars": 500, "max_prompt_chars": 500, "tokens": 150}
    assert "data" not in rows


def _bench():
    spec = importlib.util.spec_from_file_location("bench_llm_run", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _trajectory(tmp_path, records):
    path = tmp_path / "trajectory.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def test_goal_is_not_met_by_a_run_that_crashed_before_its_first_request(tmp_path, capsys):
    bench = _bench()
    crashed = _trajectory(tmp_path, [{"kind": "drive", "resumed": False},
                                     {"kind": "error", "error": "ConnectError('refused')"}])
    bench.report(crashed)
    out = capsys.readouterr().out
    assert "exit status: error" in out and "goal" in out
    assert ": met" not in out and "not measured: the run made no LLM request (exit status error)" in out


def test_goal_needs_a_finished_run(tmp_path, capsys):
    bench = _bench()
    ask = {"kind": "decision", "phase": "model", "policy": "llm", "requests": 3, "tokens": 900}
    stopped = _trajectory(tmp_path, [ask, {"kind": "exit", "exit_status": "budget_exhausted"}])
    bench.report(stopped)
    assert "not met: the run ended budget_exhausted" in capsys.readouterr().out
    done = _trajectory(tmp_path, [ask, {"kind": "exit", "exit_status": "success"}])
    bench.report(done)
    out = capsys.readouterr().out
    assert out.rstrip().endswith("tokens: met") and "exit status: success" in out
