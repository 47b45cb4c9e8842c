"""Size of an LLM run, per phase: requests, tool calls, prompt characters and tokens.

    python benchmarks/bench_llm_run.py --run-dir runs/<id>      # any finished LLM run (its trajectory.jsonl)
    python benchmarks/bench_llm_run.py --scripted patchlm       # run the scripted migration first (fake OpenAI
                                                                # server on 127.0.0.1, real HTTP, all gates G0-G6)
    python benchmarks/bench_llm_run.py --recording tests/agent/recordings/internvl_chat_relay.json \
        [--prompt-budget 12000]                                 # replay a live run's recorded answers (its
                                                                # decisions held fixed) under another prompt budget

Figures come from the run's trajectory: each decision record carries the requests it took (format-error re-asks
included), the characters sent (messages + tool schemas), and the endpoint's token usage; an LLM verdict of the
classify node is a row of its own; ``schema_chars`` is the part of prompt_chars that is tool schemas. Scripted runs count
tokens with the fake server's 4 chars/token; a real endpoint reports its own. The goal printed at the end is the
issue's: one migration in <= 15 requests and <= 150k tokens — judged only on a run that finished (exit status
success) after at least one request; a run that crashed, stopped or never asked the model is reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_REQUESTS, GOAL_TOKENS = 15, 150_000


def summarize(trajectory: Path) -> dict[str, dict[str, int]]:
    rows: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for line in trajectory.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        phase = rec.get("phase") or "?"
        if rec.get("kind") == "decision" and rec.get("policy") == "llm":
            row = rows[phase]
            row["requests"] += int(rec.get("requests", 1))
            row["prompt_chars"] += int(rec.get("prompt_chars", 0))
            row["max_prompt_chars"] = max(row["max_prompt_chars"], int(rec.get("prompt_chars", 0)))
            row["tokens"] += int(rec.get("tokens", 0))
            if rec.get("tool_schema_chars"):  # the tool schemas, sent whole with each request (in prompt_chars)
                row["schema_chars"] += int(rec["tool_schema_chars"]) * int(rec.get("requests", 1))
        elif rec.get("kind") == "classify" and rec.get("method") == "llm":
            # the LLM verdict on a failure the catalog could not name: a request of its own (older runs did not
            # record its size: counted as one request of unknown size)
            row = rows["classify"]
            row["requests"] += int(rec.get("requests", 1))
            row["prompt_chars"] += int(rec.get("prompt_chars", 0))
            row["max_prompt_chars"] = max(row["max_prompt_chars"], int(rec.get("prompt_chars", 0)))
            row["tokens"] += int(rec.get("tokens", 0))
        elif rec.get("kind") == "tool":
            rows[phase]["tool_calls"] += 1
    return {p: dict(r) for p, r in rows.items()}


def run_outcome(trajectory: Path) -> str | None:
    """How the run ended, from its trajectory: the last ``exit`` record's status, ``error`` when a bug or an outage
    ended it without one, None when it never ended (killed, or still running)."""
    status = None
    for line in trajectory.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("kind") == "exit":
            status = rec.get("exit_status")
        elif rec.get("kind") == "error" and status is None:
            status = "error"
    return status


def goal_verdict(total: dict[str, int], outcome: str | None) -> str:
    if not total.get("requests"):
        return f"not measured: the run made no LLM request (exit status {outcome or 'none: it did not finish'})"
    if outcome != "success":
        return (f"not met: the run ended {outcome or 'without an exit status'} — the goal is a finished migration "
                f"({total['requests']} requests, {total['tokens']} tokens spent on the way)")
    ok = total["requests"] <= GOAL_REQUESTS and total["tokens"] <= GOAL_TOKENS
    return "met" if ok else "NOT met"


def print_table(rows: dict[str, dict[str, int]], outcome: str | None = None) -> dict[str, int]:
    cols = ("requests", "tool_calls", "prompt_chars", "max_prompt_chars", "schema_chars", "tokens")
    print(f"{'phase':<10}" + "".join(f"{c:>18}" for c in cols))
    total = {c: 0 for c in cols}
    for phase, row in rows.items():
        print(f"{phase:<10}" + "".join(f"{row.get(c, 0):>18}" for c in cols))
        for c in cols:
            total[c] = max(total[c], row.get(c, 0)) if c == "max_prompt_chars" else total[c] + row.get(c, 0)
    print(f"{'total':<10}" + "".join(f"{total[c]:>18}" for c in cols))
    print(f"exit status: {outcome or 'none (the run did not finish)'}")
    print(f"goal <= {GOAL_REQUESTS} requests and <= {GOAL_TOKENS} tokens: {goal_verdict(total, outcome)}")
    return total


def report(trajectory: Path) -> dict[str, int]:
    return print_table(summarize(trajectory), run_outcome(trajectory))


def scripted_run(fixture: str, work: Path) -> Path:
    """The scripted migration of the regression tests (tests/agent/*_script.py), over real HTTP."""
    sys.path.insert(0, str(ROOT / "tests" / "agent"))
    from fake_openai_server import ScriptedChatServer

    from msmigrate.agent.config import LaunchSettings, LLMSettings, RunSpec, Settings
    from msmigrate.agent.runner import Run
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.standin import write_standin

    build_script = __import__(f"{fixture}_script").build_script
    source = build_source(fixture, work / "sources" / fixture)
    target = write_standin(work / "target")
    with ScriptedChatServer(build_script(source, target, source / "data" / "train.json")) as server:
        spec = RunSpec(source=source, target=target, model_name=fixture, policy="llm",
                       llm=LLMSettings(base_url=server.base_url, model="scripted", timeout_s=60),
                       launch=LaunchSettings(gate_train_iters=5))
        run = Run(spec, f"{fixture}-bench", Settings(runs_dir=work / "runs", llm_api_key="sk-bench"))
        try:
            final = run.drive()
        finally:
            run.close()
    print(f"scripted {fixture}: exit_status {final.get('exit_status')}; HTTP requests seen {len(server.requests)}")
    return work / "runs" / f"{fixture}-bench"


def recorded_run(recording: Path, work: Path, budget: int | None) -> Path:
    """A live run's recorded answers (scripts/relay_to_script.py) replayed over real HTTP, as the regression test
    does; with ``budget`` the history is fitted to another ``llm.prompt_budget_tokens``. The model's decisions are
    held fixed, so the figures say what the same conversation costs, not what a model would do with less context."""
    sys.path.insert(0, str(ROOT / "tests" / "agent"))
    from live_recording import replay

    rec = json.loads(recording.read_text(encoding="utf-8"))
    out = replay(rec, work, "recorded-bench", budget)
    print(f"recorded {rec['fixture']} (live: {rec['outcomes']['exit_status']}): exit_status "
          f"{out['final'].get('exit_status')}; HTTP requests seen {len(out['server'].requests)}; prompt budget "
          f"{out['prompt_budget']} tokens")
    return out["run_dir"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run-dir", type=Path, help="a finished run's directory (holds trajectory.jsonl)")
    ap.add_argument("--scripted", choices=("patchlm",), help="run this scripted migration first")
    ap.add_argument("--recording", type=Path, help="replay this recorded live run first (tests/agent/recordings)")
    ap.add_argument("--prompt-budget", type=int, help="with --recording: llm.prompt_budget_tokens for the replay")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if args.scripted:
        with tempfile.TemporaryDirectory(prefix="bench-llm-") as tmp:
            report(scripted_run(args.scripted, Path(tmp)) / "trajectory.jsonl")
        return 0
    if args.recording:
        with tempfile.TemporaryDirectory(prefix="bench-llm-") as tmp:
            report(recorded_run(args.recording, Path(tmp), args.prompt_budget) / "trajectory.jsonl")
        return 0
    if not args.run_dir:
        ap.error("give --run-dir, --scripted or --recording")
    report(args.run_dir / "trajectory.jsonl")
    return 0


if __name__ == "__main__":
    from results_md import recorded

    with recorded("bench_llm_run"):
        rc = main()
    sys.exit(rc)
