"""Drive the real ``msmigrate chat`` program through a pseudo-terminal (pexpect): a full migration with approval
on, /diff, /undo, /retry, a question, an instruction, an edited launch; and Ctrl-C → stop → resume."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest
from run_dirs import write_spec

APPROVAL = "approve/reject/edit> "
PROMPT = "msmigrate> "


def spawn_chat(args: list[str], env: dict, cwd: Path, preexec_fn=None) -> pexpect.spawn:
    env = {**env, "COLUMNS": "200", "LINES": "60"}
    child = pexpect.spawn(sys.executable, ["-m", "msmigrate.faces.cli", "chat", *args], env=env, cwd=str(cwd),
                          encoding="utf-8", timeout=90, dimensions=(60, 220), preexec_fn=preexec_fn)
    child.logfile_read = sys.stdout  # shown by pytest on failure
    return child


def run_id_of(runs: Path) -> str:
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    return run_dir.name


def work_files(target: Path, run_id: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(target), "diff", "--name-only", f"msmigrate/{run_id}/base",
                          f"msmigrate/{run_id}"], capture_output=True, text=True, check=True)
    return sorted(out.stdout.split())


def test_chat_full_migration_with_approval_diff_undo(tmp_path, source_model, standin, hook_env):
    spec = write_spec(tmp_path / "spec.yaml", source_model, standin)
    runs = tmp_path / "runs"
    c = spawn_chat([str(spec), "--runs-dir", str(runs)], hook_env, tmp_path)
    c.expect("policy")  # policy messages and tool calls stream as they happen
    c.expect(r"tool write_file → ok mindspeed_mm/fsdp/models/qwen2_vl/__init__.py")
    c.expect("Approval needed: code_execution for gates G1")  # approval is on by default: the plugin has not run
    c.expect(APPROVAL)
    c.sendline("approve")
    c.expect("gate G3 PASS")
    c.expect("Approval needed")  # nothing launched yet
    c.expect(APPROVAL)
    run_id = run_id_of(runs)
    config = "examples/qwen2_vl/qwen2_vl_config.yaml"

    c.sendline("/diff")
    c.expect(r"3 files changed")
    c.expect(r"\+  model_id: qwen2_vl")
    c.expect(APPROVAL)

    c.sendline("which template and data branch?")  # answered from the state, no LLM
    c.expect(r"template: qwen2vl\s+data branch: A")
    c.expect(APPROVAL)

    c.sendline("/undo")
    c.expect(r"undone [0-9a-f]{10} \(msmigrate: write examples/qwen2_vl/qwen2_vl_config.yaml")
    c.expect(APPROVAL)
    assert config not in work_files(standin, run_id)
    c.sendline("/diff")
    c.expect("2 files changed")
    c.expect(APPROVAL)

    c.sendline("keep the learning rate of the similar case")  # an instruction, stored in the run state
    c.expect("noted")
    c.expect(APPROVAL)

    c.sendline("/retry config")  # the config phase runs again (rewrites the file), G3 again, then asks again
    c.expect("reopened at phase config")
    c.expect(r"tool write_file → ok examples/qwen2_vl/qwen2_vl_config.yaml")
    c.expect("gate G3 PASS")
    c.expect(APPROVAL)
    assert config in work_files(standin, run_id)

    c.sendline("edit nproc_per_node=3 colour=red")  # a key that cannot be edited is refused …
    c.expect("colour cannot be edited")
    c.expect(APPROVAL)
    c.sendline("edit gate_train_iters=8")  # … a valid edit resumes with the new launch settings
    c.expect("gate G4 PASS")
    c.expect("gate G6 PASS")
    c.expect("exit: success")
    c.expect(PROMPT)

    c.sendline("/status")
    c.expect(r"gates passed: G0, G1, G2, G3, G4, G5, G6")
    c.expect(PROMPT)
    c.sendline("/report")
    c.expect(r"report: .*verification_report.md")
    c.expect(PROMPT)
    c.sendline("/quit")
    c.expect(f"continue with: msmigrate chat --resume {run_id}")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0

    run_dir = runs / run_id
    evidence = json.loads((run_dir / "evidence.json").read_text())
    assert evidence["exit_status"] == "success"
    records = [json.loads(ln) for ln in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    approvals = [r for r in records if r["kind"] == "approval"]
    assert [a["answer"]["action"] for a in approvals] == ["approve", "edit"]
    assert approvals[1]["answer"]["launch"] == {"gate_train_iters": 8}
    assert any(r["kind"] == "instruction" and "learning rate" in r["text"] for r in records)
    assert sorted(work_files(standin, run_id)) == sorted([config, "mindspeed_mm/fsdp/models/qwen2_vl/__init__.py",
                                                          "mindspeed_mm/fsdp/models/qwen2_vl/builder.py"])


def ignore_sigint() -> None:
    """Start the chat the way a background job of a non-interactive shell starts it: SIGINT ignored (bash does that
    to ``cmd &`` without job control, and Python then leaves SIGINT ignored instead of raising KeyboardInterrupt).
    That is how a fresh-clone CI run lost the Ctrl-C below: the pty echoed ^C, the line discipline sent SIGINT, the
    chat ignored it and G1 → G3 ran on. The chat installs its own SIGINT handler, so it must stop even so."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_chat_ctrl_c_stops_cleanly_and_resumes(tmp_path, source_model, standin, hook_env):
    spec = write_spec(tmp_path / "spec.yaml", source_model, standin)
    runs = tmp_path / "runs"
    release = tmp_path / "release-G1"  # G1 stays in flight until the test creates it: no race with a fixed sleep
    env = {**hook_env, "FAKE_GATE_HOLD": str(release), "FAKE_SLOW_GATES": "G1"}
    c = spawn_chat([str(spec), "--runs-dir", str(runs)], env, tmp_path, preexec_fn=ignore_sigint)
    c.expect(APPROVAL)  # running the model-written code (G1) waits for the user
    c.sendline("approve")
    c.expect("gate G1 running")
    c.sendline("/status")  # the prompt stays live while the agent works
    c.expect("the agent is working")
    c.sendline("prefer sdpa attention")
    c.expect("noted")
    c.sendintr()  # the pty's VINTR character: the line discipline sends SIGINT to the chat's process group
    c.expect("stopping after the current step", timeout=30)
    assert not release.exists()  # the Ctrl-C was acted on while G1 was still in flight
    release.touch()
    c.expect(r"stopped at a step boundary .* is\s+resumable")
    c.expect(PROMPT)
    run_id = run_id_of(runs)
    c.sendline("/status")
    c.expect(r"gates passed: G0, G1\b")  # the step in flight finished; nothing after it ran
    c.expect(PROMPT)
    c.sendline("what instructions did I give?")
    c.expect(r"instructions given: prefer sdpa attention")
    c.expect(PROMPT)
    c.sendline("/quit")
    c.expect(pexpect.EOF)
    c.close()
    records = [json.loads(ln) for ln in (runs / run_id / "trajectory.jsonl").read_text().splitlines()]
    assert any(r["kind"] == "stopped" for r in records)
    assert not any(r["kind"] == "gate" and r["gate"] == "G2" for r in records)

    c = spawn_chat(["--runs-dir", str(runs)], hook_env, tmp_path)
    c.expect("no run yet")
    c.expect(PROMPT)
    c.sendline(f"/resume {run_id}")  # same as `msmigrate chat --resume RUN_ID`
    c.expect("gate G2 PASS")  # continues after G1; the model phase is not redone
    c.expect(APPROVAL)
    c.sendline("approve")
    c.expect("exit: success")
    c.expect(PROMPT)
    c.sendline("/quit")
    c.expect(pexpect.EOF)
    records = [json.loads(ln) for ln in (runs / run_id / "trajectory.jsonl").read_text().splitlines()]
    assert [r["gate"] for r in records if r["kind"] == "gate"].count("G1") == 1


def test_chat_terminal_prompt_completes_slash_commands(tmp_path, hook_env):
    """On a real terminal (TERM=xterm) the prompt is prompt_toolkit: Tab completes slash commands, Ctrl-C at the
    prompt only hints, /quit leaves."""
    env = {**hook_env, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
    c = pexpect.spawn(sys.executable, ["-m", "msmigrate.faces.cli", "chat", "--runs-dir", str(tmp_path / "runs")],
                      env=env, cwd=str(tmp_path), encoding="utf-8", timeout=60, dimensions=(40, 150))
    c.expect("no run yet")
    c.expect("msmigrate>")
    c.send("/sta")
    c.send("\t")  # completes to /status
    time.sleep(0.5)
    c.send("\r")
    c.expect("no run open")
    c.sendcontrol("c")
    c.expect("/quit leaves")
    c.send("/quit\r")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0
    assert "/status" in (tmp_path / "runs" / ".chat_history").read_text()
