"""Every run ends with ``verification_report.md`` and ``evidence.json`` whatever the exit, the report's first line
saying what, why and what to do: a stop by the user (Ctrl-C during G4 launches neither G5 nor G6), an exception in
a node, an LLM endpoint that refuses connections or answers with errors."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent_fakes import MODEL, FakeGates, ScriptedPolicy, echo_tool, make_run
from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.runner import DriveHooks, Run


def _artifacts(run) -> tuple[str, dict]:
    report = (run.run_dir / "verification_report.md").read_text()
    return report, json.loads((run.run_dir / "evidence.json").read_text())


def test_stop_during_g4_launches_nothing_more_and_resumes_after_it(fast_prepare, tmp_path):
    stop = threading.Event()
    gates = FakeGates()
    table = gates.as_dict()
    g4 = table["G4"]

    def g4_with_ctrl_c(deps, state):  # the user presses Ctrl-C while G4's launch runs
        record = g4(deps, state)
        stop.set()
        return record

    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates)
    run.deps.gates["G4"] = g4_with_ctrl_c
    try:
        out = run.drive(hooks=DriveHooks(stop_requested=stop.is_set))
    finally:
        run.close()
    assert out["exit_status"] == "stopped_by_user"
    assert gates.calls == ["G1", "G2", "G3", "G4"]  # neither G5 nor G6 launched after the stop
    assert out["counters"]["launches"] == 1
    assert [r["before"] for r in run.trajectory.records("gates_stopped")] == ["G5"]
    report, evidence = _artifacts(run)
    first = report.splitlines()[0]
    assert first.startswith("**stopped_by_user** — stopped at a step boundary by the user, in phase verify, before "
                            "G5, G6; nothing more was started after the stop. What to do: `msmigrate run --resume ")
    assert evidence["exit_status"] == "stopped_by_user" and evidence["gates"]["G4"]["passed"]
    assert out["artifacts"]["report"] == str(run.run_dir / "verification_report.md")

    again = Run.resume(run.run_id, run.settings, policy=ScriptedPolicy(), tools=run.deps.tools,
                       gates=gates.as_dict())
    try:
        out = again.drive()
    finally:
        again.close()
    assert out["exit_status"] == "success", out.get("exit_detail")
    assert gates.calls == ["G1", "G2", "G3", "G4", "G5", "G6"]  # G4 proved this commit already: kept
    assert again.trajectory.records("gate_kept")[0]["gate"] == "G4"
    assert _artifacts(again)[0].startswith("**success**")


def test_an_exception_in_a_node_ends_with_report_and_evidence(fast_prepare, tmp_path):
    gates = FakeGates()

    def broken_g2(deps, state):
        raise RuntimeError("data gate bug: index out of range")

    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates)
    run.deps.gates["G2"] = broken_g2
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["exit_status"] == "error"
    report, evidence = _artifacts(run)
    assert report.splitlines()[0] == (
        f"**error** — RuntimeError: data gate bug: index out of range. What to do: the traceback is in "
        f"{run.run_dir / 'error.txt'}; `msmigrate run --resume {run.run_id} --runs-dir {run.run_dir.parent}` "
        "continues from the last checkpoint (report the traceback if it fails again)")
    assert evidence["exit_status"] == "error" and evidence["gates"]["G1"]["passed"] and "G2" not in evidence["gates"]
    assert "| G1 |" in report and "| G2 | " in report and out["artifacts"]["evidence"].endswith("evidence.json")


class _Failing(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"error": {"message": "model overloaded", "type": "server_error"}}'
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(params=["nothing listening", "server errors"])
def bad_endpoint(request):
    if request.param == "nothing listening":
        with socket.socket() as sock:  # a port that was free a moment ago: connections are refused
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        yield f"http://127.0.0.1:{port}/v1"
        return
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_an_unreachable_llm_endpoint_ends_with_report_and_evidence(fast_prepare, tmp_path, bad_endpoint):
    spec = RunSpec(source=fast_prepare["source"], target=fast_prepare["target"], model_name=MODEL, policy="llm",
                   llm={"base_url": bad_endpoint, "model": "m", "max_transport_retries": 0, "timeout_s": 5})
    settings = Settings(runs_dir=tmp_path / "runs", runtime_python=sys.executable)
    run = Run(spec, f"llm-{int(time.time() * 1000) % 100000}", settings, tools=[echo_tool()],
              gates=FakeGates().as_dict())  # the real LLM policy, built from the spec
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["exit_status"] == "error" and "EndpointError: LLM endpoint unavailable after 1 tries" in out["exit_detail"]
    report, evidence = _artifacts(run)
    first = report.splitlines()[0]
    assert first.startswith("**error** — EndpointError: LLM endpoint unavailable after 1 tries")
    assert f"What to do: check that the LLM endpoint {bad_endpoint} is up and answers chat completions" in first
    assert f"`msmigrate run --resume {run.run_id} --runs-dir {run.run_dir.parent}`" in first
    assert evidence["exit_status"] == "error" and evidence["gates"]["G0"]["passed"]


def test_budget_and_ctrl_c_inside_a_step_end_with_report_and_evidence(fast_prepare, tmp_path):
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(loop=True), budgets={"policy_steps": 2})
    try:
        out = run.drive()
    finally:
        run.close()
    assert out["exit_status"] == "budget_exhausted"
    report, evidence = _artifacts(run)
    assert report.splitlines()[0] == ("**budget_exhausted** — policy steps budget (2) used up (in phase model). What to "
                                      "do: raise the budget named above (`budgets` in the spec) and start the run again")
    assert evidence["exit_status"] == "budget_exhausted"

    gates = FakeGates()

    def ctrl_c_in_g3(deps, state):  # a headless Ctrl-C lands while G3 runs
        raise KeyboardInterrupt

    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates)
    run.deps.gates["G3"] = ctrl_c_in_g3
    try:
        with pytest.raises(KeyboardInterrupt):  # the face still sees it (it prints how to resume)
            run.drive()
    finally:
        run.close()
    report, evidence = _artifacts(run)
    assert report.startswith("**stopped_by_user** — interrupted (Ctrl-C or SIGTERM) inside a step; the resumed run "
                             "redoes that step. What to do: `msmigrate run --resume ")
    assert evidence["exit_status"] == "stopped_by_user" and sorted(evidence["gates"]) == ["G0", "G1", "G2"]


def test_a_launch_ended_by_the_stop_is_no_verdict(fast_prepare, tmp_path):
    """The stop cancelled G4's Slurm job (after its grace): the failed record says nothing about the code — no
    classify, no repair; the resumed run launches G4 again."""
    stop = threading.Event()
    gates = FakeGates({"G4": ["RuntimeError: job 4242 cancelled"]})
    g4 = gates.gate("G4")

    def g4_cancelled_by_the_stop(deps, state):
        stop.set()
        return g4(deps, state)

    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates)
    run.deps.gates["G4"] = g4_cancelled_by_the_stop
    try:
        out = run.drive(hooks=DriveHooks(stop_requested=stop.is_set))
    finally:
        run.close()
    assert out["exit_status"] == "stopped_by_user" and out["phase"] == "verify"
    assert "G4" not in out["gates"] and out["gate_history"][-1]["stopped_by_user"]
    assert run.trajectory.records("classify") == [] and run.trajectory.records("gates_stopped")[0]["during"] == "G4"
    again = Run.resume(run.run_id, run.settings, policy=ScriptedPolicy(), tools=run.deps.tools, gates=gates.as_dict())
    try:
        out = again.drive()
    finally:
        again.close()
    assert out["exit_status"] == "success" and gates.calls == ["G1", "G2", "G3", "G4", "G4", "G5", "G6"]
