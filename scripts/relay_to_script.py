"""Turn a live relay run (scripts/llm_relay.py) into a scripted-LLM recording for the HTTP regression tests.

    python scripts/relay_to_script.py --fixture internvl_chat --relay-dir /work/relay/internvl2 \\
        --work /tmp/llm_live/internvl2 --run-dir /tmp/llm_live/internvl2/runs/<id> \\
        --out tests/agent/recordings/internvl_chat_relay.json

Each answered request becomes one turn of ``tests/agent/fake_openai_server.py``'s script, keyed ``<phase>@<attempt>``
as that server reads them off the node prompt (so a phase re-entered after a gate failure replays its own turns;
``#<visit>`` added for a phase entered again with the same attempt);
requests without tools (the LLM classify stage) become the ``classify`` list. The run's absolute paths (the work
dir's source and target, the run dir) are written as ``<<SOURCE>>`` / ``<<TARGET>>`` / ``<<RUN>>`` so the replay
can point at fresh copies. The turn index the server will compute (assistant turns with tool calls so far) is checked against each recorded
request, so a recording the server cannot replay in order is refused here, not discovered in the test.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from msmigrate.agent.state import PHASE_GATES

PHASE_RE = re.compile(r"# Phase: (\w+)\b.*?\(attempt (\d+) of \d+\)")  # as tests/agent/fake_openai_server.py


def templated(value: Any, paths: dict[str, str]) -> Any:
    if isinstance(value, str):
        for key, path in paths.items():
            value = value.replace(path, f"<<{key.upper()}>>")
        return value
    if isinstance(value, list):
        return [templated(v, paths) for v in value]
    if isinstance(value, dict):
        return {k: templated(v, paths) for k, v in value.items()}
    return value


def outcomes(run_dir: Path) -> dict[str, Any]:
    """What the live run's tools and gates answered, in order (each gate with the number of tool calls before it),
    how it ended, and the phases whose gate passed: the replay must see the same."""
    tools, gates, passed_phases = [], [], []
    for line in (run_dir / "trajectory.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("kind") == "tool":
            tools.append([rec.get("phase"), rec.get("name"), str(rec.get("result", "")).startswith('{"ok": true')])
        elif rec.get("kind") == "finish_declined":
            # the turn's finish_phase was declined (a check of the turn failed): the model was answered ok: false
            # (runs before the tools node recorded the declined answer itself logged the tool's own ack here)
            last = max(i for i, t in enumerate(tools) if t[1] == "finish_phase")
            tools[last][2] = False
        elif rec.get("kind") == "gate":
            gates.append([rec.get("gate"), bool(rec.get("passed")), len(tools)])
            # a phase passes on its own gate (G1 re-run first in a later phase because its files changed is not
            # that phase passing)
            own = rec.get("gate") in PHASE_GATES.get(rec.get("phase"), ())
            if rec.get("passed") and own and rec.get("phase") not in ("prepare", *passed_phases):
                passed_phases.append(rec.get("phase"))
    evidence = json.loads((run_dir / "evidence.json").read_text(encoding="utf-8"))
    failed = [g for g, ok, _ in gates if not ok]
    processor = run_dir / "probes" / "processor_class.json"
    return {"tools": tools, "gates": gates, "passed_phases": passed_phases,
            "exit_status": evidence.get("exit_status"), "stopped_at": failed[-1] if failed else None,
            "runtime_processor_kind": json.loads(processor.read_text()).get("kind") if processor.is_file() else None}


def fixed_since(run_dir: Path, gate: str, why: str) -> dict[str, Any]:
    """A gate the live run failed once that passes at the current code on the same delivery (a msmigrate fix since
    the run): the replay stops being the live path there, so the recording says where: the gate, why, and how many
    model requests the live run had made before that verdict (its repair turns after it go unused)."""
    requests = 0
    for line in (run_dir / "trajectory.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("kind") == "gate" and rec.get("gate") == gate and not rec.get("passed"):
            return {"gate": gate, "why": why, "requests_before": requests}
        requests += rec.get("kind") == "decision" or (rec.get("kind") == "classify" and bool(rec.get("requests")))
    raise SystemExit(f"--fixed-since {gate}: the live run never failed {gate}")


def convert(relay_dir: Path, work: Path, run_dir: Path | None = None) -> dict[str, Any]:
    paths = {"run": str(run_dir)} if run_dir else {}
    paths.update(source=str(work / "source"), target=str(work / "target"))
    script: dict[str, list[dict[str, Any]]] = {}
    classify: list[str] = []
    order: list[str] = []
    visits: dict[str, int] = {}
    n = 0
    while (relay_dir / f"resp-{n + 1:04d}.json").is_file():
        n += 1
        req = json.loads((relay_dir / f"req-{n:04d}.json").read_text(encoding="utf-8"))
        resp = json.loads((relay_dir / f"resp-{n:04d}.json").read_text(encoding="utf-8"))
        if not req.get("tools"):
            classify.append(resp.get("content") or "")
            order.append("classify")
            continue
        messages = req.get("messages") or []
        prompt = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
        found = PHASE_RE.search(prompt)
        if not found:
            raise SystemExit(f"req-{n:04d}: no phase header in the node prompt")
        key = f"{found.group(1)}@{found.group(2)}"
        if not any(m.get("role") in ("assistant", "tool") for m in messages):  # a fresh conversation of the phase
            visits[key] = visits.get(key, 0) + 1
        if visits.get(key, 1) > 1:  # re-entered with the same attempt (the server counts visits the same way)
            key = f"{key}#{visits[key]}"
        turns = script.setdefault(key, [])
        index = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if index != len(turns):
            raise SystemExit(f"req-{n:04d} ({key}): the server would replay turn {index}, the recording has "
                             f"{len(turns)} turns before it (a format-error re-ask?)")
        turn: dict[str, Any] = {"content": resp.get("content") or ""}
        if resp.get("tool_calls"):
            turn["tool_calls"] = [{"name": c["name"], "arguments": c.get("arguments") or {}}
                                  for c in resp["tool_calls"]]
        turns.append(templated(turn, paths))
        order.append(key)
    done = relay_dir / "DONE"
    return {"recorded_from": {"requests": n, "order": order,
                              "done": json.loads(done.read_text()) if done.is_file() else None},
            "script": script, "classify": templated(classify, paths),
            "outcomes": outcomes(run_dir) if run_dir else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--relay-dir", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True, help="the work dir scripts/llm_relay_run.sh used")
    ap.add_argument("--fixture", required=True, help="the source fixture the run migrated (msmigrate fixtures list)")
    ap.add_argument("--run-dir", type=Path, help="the live run's dir: its tool/gate outcomes are recorded too")
    ap.add_argument("--note", default="", help="what the live run showed (why it stopped, if it did)")
    ap.add_argument("--fixed-since", nargs=2, metavar=("GATE", "WHY"),
                    help="a gate the live run failed once that the current code passes on the same delivery (with "
                         "--run-dir): the replay must go green from there without the live run's repair turns")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rec = {"fixture": args.fixture, "note": args.note, **convert(args.relay_dir, args.work, args.run_dir)}
    if args.fixed_since:
        if not args.run_dir:
            raise SystemExit("--fixed-since needs --run-dir (the live run's trajectory)")
        rec["fixed_since"] = fixed_since(args.run_dir, *args.fixed_since)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{rec['recorded_from']['requests']} requests -> {args.out} "
          f"({', '.join(f'{k}: {len(v)} turns' for k, v in rec['script'].items())}; classify {len(rec['classify'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
