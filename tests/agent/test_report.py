"""verification_report.md / evidence.json / loss_curve.png rendering."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import git

from msmigrate.agent.report import _gate_rows, diff_summary, render_report, write_artifacts


def gate(name, passed=True, summary="ok", losses=None, label=""):
    metrics = {"losses": losses, "steps": len(losses), "first_loss": losses[0], "last_loss": losses[-1],
               "median_step_ms": 12.5, "samples_per_s": 3.0} if losses else {}
    return {"gate": name, "passed": passed, "summary": summary,
            "evidence": [{"label": label, "command": ["x"], "exit_code": 0 if passed else 1, "metrics": metrics}]}


STATE = {
    "run_id": "fakevl-1", "exit_status": "gates_failed", "exit_detail": "G5 still failing",
    "plan": {"model_id": "fakevl", "route": "transformers", "data_branch": "A", "template": "qwen2vl",
             "reasons": ["transformers-native class", "template qwen2vl fits"]},
    "gates": {"G0": gate("G0"), "G1": {**gate("G1", summary="plugin | imports\nfine"), "parity": {"model": {
                  "status": "pass", "eager": {"loss": 6.2, "max_abs_dlogit": 0.0, "dloss": 0.0},
                  "meta": {"loss": 6.2, "max_abs_dlogit": 1.5e-07, "dloss": 0.0}, "source_loss": 6.2,
                  "tolerance": {"max_abs_dlogit": 1e-4, "dloss": 1e-5}, "batch_source": "source processor"}}},
              "G4": gate("G4", losses=[2.0, 1.5, 1.2], label="single"), "G5": gate("G5", False, "losses differ")},
    "counters": {"policy_steps": 7, "tool_calls": 4.0, "tokens": 321, "launches": 2},
    "last_failure": {"gate": "G5", "case_id": "nondeterministic-loss", "owner": "config", "diagnosis": "seed"},
}


def test_render_report_tables_decisions_and_risks():
    text = render_report(STATE, "(no changes)", has_plot=True)
    first, _, rest = text.partition("\n\n")  # the first line: what, why, what to do
    assert first == ("**gates_failed** — G5 still failing. What to do: read the failing gate's evidence below; "
                     "`msmigrate chat --resume fakevl-1` then `/retry PHASE` repairs from that phase")
    assert rest.startswith("# Verification report — fakevl\n")
    assert "- exit status: **gates_failed** — G5 still failing" in text
    assert "policy steps: 7, tool calls: 4, tokens: 321, training launches: 2" in text
    table = text.split("## Gates\n\n", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    rows = {ln.split("|")[1].strip(): ln for ln in table}
    assert list(rows) == ["G0", "G1", "G2", "G3", "G4", "G5", "G6"]
    assert "| PASS |" in rows["G0"] and "| FAIL | — | losses differ |" in rows["G5"] and "| not run |" in rows["G6"]
    # the parity column carries the figures; the parity section the full table
    assert "| model pass: max\\|Δlogit\\| 0.00e+00 / meta 1.50e-07" in rows["G1"]
    assert "## Parity with the source" in text and "| plugin, meta init + load | 6.2 | 1.5e-07 | 0.0 |" in text
    assert "plugin \\| imports fine" in rows["G1"]  # pipes escaped, newlines flattened: the table stays a table
    assert "| G4 single | 3 | 2.0 | 1.2 | 12.5 | 3.0 |" in text
    assert "- template: `qwen2vl`" in text and "  - template qwen2vl fits" in text
    assert "![loss curve](loss_curve.png)" in text
    assert "gate G5 → case `nondeterministic-loss` (owner config): seed" in text


def test_render_report_without_plot_metrics_or_failure():
    text = render_report({"run_id": "r", "exit_status": "success", "gates": {}}, "diff", has_plot=False)
    assert "# Verification report — r" in text and "loss_curve" not in text and "Training metrics" not in text
    assert "last failure" not in text and "```\ndiff\n```" in text


def test_write_artifacts_files(tmp_path):
    deps = SimpleNamespace(ctx=SimpleNamespace(run_dir=tmp_path / "run", target=tmp_path / "no-repo",
                                               work_branch="msmigrate/x", checkout=None))
    out = write_artifacts(deps, {**STATE, "artifacts": {"base_commit": "abc", "plan": "p"}})
    run = tmp_path / "run"
    assert out["report"] == str(run / "verification_report.md") and out["evidence"] == str(run / "evidence.json")
    assert out["loss_curve"] == str(run / "loss_curve.png") and out["plan"] == "p"
    assert (run / "loss_curve.png").read_bytes()[:4] == b"\x89PNG"
    evidence = json.loads((run / "evidence.json").read_text())
    assert evidence["exit_status"] == "gates_failed" and evidence["gates"]["G4"]["passed"] is True
    assert evidence["counters"]["tokens"] == 321
    assert "(diff unavailable" in (run / "verification_report.md").read_text()


def test_no_losses_no_plot(tmp_path):
    deps = SimpleNamespace(ctx=SimpleNamespace(run_dir=tmp_path, target=tmp_path, work_branch="b", checkout=None))
    out = write_artifacts(deps, {"run_id": "r", "gates": {"G1": gate("G1")}})
    assert "loss_curve" not in out and not (tmp_path / "loss_curve.png").exists()


def test_diff_summary_of_the_work_branch(tmp_path):
    repo = git.Repo.init(tmp_path, initial_branch="master")
    (tmp_path / "a.txt").write_text("a\n")
    repo.index.add(["a.txt"])
    author = git.Actor("t", "t@t.invalid")
    base = repo.index.commit("base", author=author, committer=author).hexsha
    assert diff_summary(tmp_path, base, "msmigrate/r1") == "(no edits recorded)"
    repo.create_head("msmigrate/r1").checkout()
    assert diff_summary(tmp_path, base, "msmigrate/r1") == "(no changes)"
    (tmp_path / "b.txt").write_text("b\n")
    repo.index.add(["b.txt"])
    repo.index.commit("add b", author=author, committer=author)
    text = diff_summary(tmp_path, base, "msmigrate/r1")
    assert "b.txt" in text and "1 file changed" in text and "commits on msmigrate/r1:" in text and "add b" in text
    assert diff_summary(tmp_path, None, "msmigrate/r1") == "(no edits recorded)"
    assert diff_summary(Path(tmp_path / "missing"), base, "x").startswith("(diff unavailable")


def test_next_actions_are_commands_and_risks_are_about_this_run():
    """A green CPU run: the branch, where it lives, how to review and take it, the launch line of the delivered
    script; its risks name what it did not prove (CPU-only launches), not boilerplate about other runs."""

    cpu = [{"label": "x", "device": "cpu", "metrics": {}}]
    state = {"run_id": "m-1", "exit_status": "success", "plan": {"script_path": "examples/m/finetune_m.sh"},
             "gates": {g: {"passed": True, "summary": "", "evidence": cpu if g in ("G4", "G5", "G6") else []}
                       for g in ("G0", "G1", "G2", "G3", "G4", "G5", "G6")}}
    where = {"branch": "msmigrate/m-1", "checkout": "/srv/my mm", "runs_dir": "/r"}
    text = render_report(state, "(diff)", False, where)
    actions = text.split("## Next actions")[1]
    assert "`git -C '/srv/my mm' diff msmigrate/m-1/base..msmigrate/m-1`" in actions
    assert "`git -C '/srv/my mm' merge --no-ff msmigrate/m-1`" in actions
    assert "`cd '/srv/my mm' && bash examples/m/finetune_m.sh`" in actions
    risks = text.split("## Risks")[1].split("## Next actions")[0]
    assert "ran on CPU only" in risks and "Failed gates" not in risks and "Not run" not in risks
    # a run that stopped in G3: what failed, what never ran, and the command that resumes it
    stopped = {**state, "exit_status": "gates_failed",
               "gates": {"G0": {"passed": True}, "G1": {"passed": True}, "G2": {"passed": True},
                         "G3": {"passed": False, "summary": "bad"}}}
    text = render_report(stopped, "(diff)", False, where)
    assert "- Failed gates: G3" in text and "- Not run: G4, G5, G6" in text and "ran on CPU only" not in text
    assert "`msmigrate chat --resume m-1 --runs-dir /r` and `/retry`" in text and "merge --no-ff" not in text
    crashed = render_report({**stopped, "exit_status": "error"}, "(diff)", False, where)
    assert "Continue this run from its last finished step: `msmigrate run --resume m-1 --runs-dir /r`" in crashed
    declined = render_report({**stopped, "exit_status": "unsupported_by_policy"}, "(diff)", False, where)
    assert "--resume" not in declined  # nothing to continue: the policy cannot do it


def test_gate_summaries_are_cut_at_a_word_with_numbers_whole():
    from msmigrate.core.text_clip import clip

    text = "max abs dlogit 6.254289 over tolerance 0.001 on the eager path"
    assert clip(text, 100) == text
    assert clip(text, 20) == "max abs dlogit…"  # 6.254289 would not fit whole: it is left out, not cut to 6.25
    assert clip(text, 24) == "max abs dlogit 6.254289…"
    assert clip("/a/very/long/path/without/spaces", 10) == "/a/very/l…"  # one token: cut inside, marked
    row = next(r for r in _gate_rows({"G1": {"passed": False, "summary": "x " * 147 + "6.254289 and more"}})
               if r.startswith("| G1"))
    assert "6.25…" not in row and row.rstrip(" |").endswith("…")


def test_a_real_weights_cut_that_keeps_later_layers_names_them():
    """A stack cut to one layer of each kind (a full-attention layer among sliding ones) is not its first layers:
    the report names the layers kept; a plain cut still reads as the first layers."""
    def text(kept):
        rec = {"status": "pass", "problems": [], "layers_per_tower": 2,
               "weights": {"folder": "/src", "shards": ["model.safetensors"], "tensors_loaded": 10, "kept_layers": kept}}
        g4 = {**gate("G4"), "parity": {"training_real_weights": rec}}
        return render_report({"gates": {"G4": g4}, "plan": STATE["plan"]}, "", False)

    assert ("cut to 2 layers per tower (text_config.num_hidden_layers: its layers [0, 5], one of each kind)"
            in text({"text_config.num_hidden_layers": [0, 5]}))
    assert "cut to its first 2 layers per tower, 10 tensors" in text({})
