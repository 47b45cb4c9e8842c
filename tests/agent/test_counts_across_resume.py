"""Counts stay true across interruptions: the launch counter follows the launch journal (a resumed verify node reuses
launches finished before the kill and would not count them again), and /gates still shows a FAIL that made the run
re-enter a phase before it was stopped and resumed."""

from __future__ import annotations

from agent_fakes import CONFIG_FAILURE, FakeGates, ScriptedPolicy, make_run

from msmigrate.tools.launcher.records import append_event


class JournalGates(FakeGates):
    """Launch gates journal what they launch, as the launcher does. G4 finds its three launches already in the
    journal (run before a kill -9 by the node's first visit, whose count was never saved) and reuses them."""

    def gate(self, name: str):
        inner = super().gate(name)

        def run(deps, state):
            record = inner(deps, state)
            if name == "G4":
                for n in range(3):  # what the killed first visit launched
                    append_event(deps.ctx.run_dir, {"event": "started", "launch_id": f"g4-{n}", "launch_key": f"k{n}",
                                                    "attempt": 1})
                record["launches"] = 0  # reused now
            elif record.get("launches"):
                append_event(deps.ctx.run_dir, {"event": "started", "launch_id": f"{name.lower()}-0",
                                                "launch_key": name, "attempt": 1})
            return record

        return run


def test_launch_counter_equals_the_journal(fast_prepare, tmp_path):
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), JournalGates())
    try:
        out = run.drive()
        assert out["exit_status"] == "success"
        # journal: 3 (G4, before the "kill") + G5 + G6; the gates' own counts add up to 2
        assert out["counters"]["launches"] == 5
        assert "training launches: 5" in (run.run_dir / "verification_report.md").read_text()
    finally:
        run.close()


def test_gates_view_keeps_a_fail_from_before_a_resume(fast_prepare, tmp_path):
    from rich.console import Console

    from msmigrate.agent.runner import Run
    from msmigrate.faces.chat.render import gates_table

    gates = FakeGates({"G3": [CONFIG_FAILURE]})
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates)
    for chunk in run.graph.stream(run.initial_state(), run.config, stream_mode="updates"):
        if "classify" in chunk:  # stopped (Ctrl-C) right after the failure was routed back to its phase
            break
    run.close()
    again = Run.resume(run.run_id, run.settings, policy=ScriptedPolicy(), tools=[], gates=gates.as_dict())
    try:
        state = again.snapshot()
        assert "G3" not in state["gates"]  # the re-entered phase's proof is void …
        console = Console(width=300, record=True)
        console.print(gates_table(state))
        g3 = next(ln for ln in console.export_text().splitlines() if "│ G3 " in ln)
        assert "FAIL (earlier; to re-run)" in g3 and "No module named" in g3  # … but the FAIL is still shown
    finally:
        again.close()
