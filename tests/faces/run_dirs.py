"""Hand-made run folders (evidence.json, spec.yaml, trajectory.jsonl + a git target with a work branch) for
testing the scorers and the eval harness without running the graph, and the spec files the faces tests start from."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

GATES = ("G0", "G1", "G2", "G3", "G4", "G5", "G6")
CONFIG = ("model:\n  model_id: {model_id}\ndata:\n  dataset_param:\n    dataset_type: huggingface\n"
          "    basic_parameters:\n      template: {template}\ntraining:\n  train_iters: 6\n")


def write_spec(path: Path, source: Path, target: Path, model_name: str = "qwen2_vl") -> Path:
    path.write_text(f"source: {source}\ntarget: {target}\nmodel_name: {model_name}\n")
    return path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}).stdout


def make_target(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("target\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "base")
    return path.resolve()


def evidence_item() -> dict:
    return {"label": "x", "command": ["true"], "exit_code": 0, "started": "2026-01-01T00:00:00.000",
            "ended": "2026-01-01T00:00:01.000", "log_excerpt": "", "metrics": {}}


PARITY_KINDS = {"G1": "model", "G2": "data", "G6": "sharded"}


def make_run(runs: Path, run_id: str, target: Path, *, model: str = "mm", template: str = "tmpl",
             failing_gate: str | None = None, outside_edit: bool = False, drop_evidence_of: str | None = None,
             counters: dict | None = None, plan: dict | None = None, parity: dict | None = None) -> Path:
    """A finished run of ``model`` whose edits are commits on ``msmigrate/<run_id>`` of ``target``."""
    branch = f"msmigrate/{run_id}"
    git(target, "checkout", "-q", "main")
    git(target, "checkout", "-q", "-b", branch)
    git(target, "tag", f"{branch}/base")
    files = {f"examples/{model}/{model}_config.yaml": CONFIG.format(model_id=model, template=template),
             f"mindspeed_mm/fsdp/models/{model}/__init__.py": "X = 1\n"}
    if outside_edit:
        files["mindspeed_mm/fsdp/train/trainer.py"] = "# patched core\n"
    for rel, text in files.items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_text(text)
        git(target, "add", rel)
    git(target, "commit", "-q", "-m", "edits")
    git(target, "checkout", "-q", "main")
    gates = {}
    for g in GATES:
        passed = g != failing_gate
        gates[g] = {"gate": g, "passed": passed, "summary": "", "evidence": [] if g == drop_evidence_of else [evidence_item()]}
        kind = PARITY_KINDS.get(g)
        if kind:  # parity records as the gates write them; ``parity`` overrides a kind's record (None drops it)
            record = (parity or {}).get(kind, {"status": "pass", "problems": []})
            gates[g]["parity"] = {kind: record} if record is not None else {}
        if not passed:
            break
    status = "gates_failed" if failing_gate else "success"
    run_dir = runs / run_id
    run_dir.mkdir(parents=True)
    plan = plan or {"model_id": model, "data_branch": "A", "template": template, "dataset_type": "huggingface",
                    "config_path": f"examples/{model}/{model}_config.yaml"}
    (run_dir / "evidence.json").write_text(json.dumps({
        "run_id": run_id, "exit_status": status, "plan": plan, "gates": gates,
        "counters": counters or {"launches": 3, "policy_steps": 6, "tool_calls": 4, "tokens": 0}}))
    (run_dir / "spec.yaml").write_text(f"source: {target}\ntarget: {target}\nmodel_name: {model}\n")
    (run_dir / "trajectory.jsonl").write_text('{"t": 100.0, "kind": "drive"}\n{"t": 112.5, "kind": "exit"}\n')
    return run_dir


def as_terminal_foreground_job() -> None:
    """``preexec_fn`` for a face started as a terminal's foreground job, where Ctrl-C is SIGINT with its default
    action. A suite started as a background job of a non-interactive shell (``cmd &``: bash ignores SIGINT there, and
    children inherit it) would otherwise start the face with SIGINT ignored, as a background job must, and a test of
    Ctrl-C would wait out its held gate instead (a rerun outside CI failed that way)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

