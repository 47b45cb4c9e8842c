"""``msmigrate run`` without a terminal: an approval it cannot ask for ends in a distinct status with the exact
command that continues; every mistake a user can make is one line and a non-zero exit, never a traceback."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

from run_dirs import as_terminal_foreground_job


def write_spec(path, source, target):
    path.write_text(f"source: {source}\ntarget: {target}\nmodel_name: qwen2_vl\n")
    return path


def msmigrate(*args, env, cwd, timeout=180):
    return subprocess.run([sys.executable, "-m", "msmigrate.faces.cli", *map(str, args)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _one_error_line(out) -> str:
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, out.stderr
    return lines[0]


def test_headless_approval_ends_awaiting_approval_then_the_printed_command_continues(tmp_path, source_model,
                                                                                       standin, hook_env):
    spec = write_spec(tmp_path / "spec.yaml", source_model, standin)
    spec.write_text(spec.read_text() + "approval: true\n")
    runs = tmp_path / "runs"
    first = msmigrate("run", spec, "--runs-dir", runs, env=hook_env, cwd=tmp_path)
    assert first.returncode == 3, first.stderr
    summary = json.loads(first.stdout)  # first: running the model-written code (G1) waits for the user
    assert summary["exit_status"] == "awaiting_approval" and summary["pending"]["kind"] == "code_execution"
    assert summary["gates"] == {"G0": True}
    line = [ln for ln in first.stderr.splitlines() if ln.startswith("awaiting approval")]
    assert len(line) == 1 and "code_execution of G1" in line[0] and "--set" not in line[0], first.stderr
    assert "--set edits launch settings" in _one_error_line(msmigrate(  # nothing to edit in this question
        *shlex.split(summary["approve_command"])[1:-1], "--set", "nnodes=2", env=hook_env, cwd=tmp_path))
    out = msmigrate(*shlex.split(summary["approve_command"])[1:], env=hook_env, cwd=tmp_path)
    assert out.returncode == 3, out.stderr
    summary = json.loads(out.stdout)
    assert summary["exit_status"] == "awaiting_approval" and summary["pending"]["kind"] == "launch"
    line = [ln for ln in out.stderr.splitlines() if ln.startswith("awaiting approval")]
    assert len(line) == 1 and "G4, G5, G6" in line[0] and "nproc_per_node=2" in line[0], out.stderr
    command = summary["approve_command"]
    assert command in line[0]
    assert command == f"msmigrate run --resume {summary['run_id']} --runs-dir {runs.resolve()} --approve"
    assert summary["gates"] == {"G0": True, "G1": True, "G2": True, "G3": True}  # nothing launched yet

    again = msmigrate(*shlex.split(command)[1:], env=hook_env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["exit_status"] == "success"
    # a finished run has nothing to approve: one line, not a traceback
    assert "not waiting for an approval" in _one_error_line(
        msmigrate(*shlex.split(command)[1:], env=hook_env, cwd=tmp_path))


def test_headless_edit_is_checked_before_it_answers(tmp_path, source_model, standin, hook_env):
    spec = write_spec(tmp_path / "spec.yaml", source_model, standin)
    spec.write_text(spec.read_text() + "approval: true\n")
    runs = tmp_path / "runs"
    run_id = json.loads(msmigrate("run", spec, "--runs-dir", runs, env=hook_env, cwd=tmp_path).stdout)["run_id"]
    code = msmigrate("run", "--resume", run_id, "--runs-dir", runs, "--approve", env=hook_env, cwd=tmp_path)
    assert json.loads(code.stdout)["pending"]["kind"] == "launch"  # the code-execution ask answered, launch next
    bad = _one_error_line(msmigrate("run", "--resume", run_id, "--runs-dir", runs, "--set", "nnodes=abc",
                                    env=hook_env, cwd=tmp_path))
    assert "nnodes" in bad and "integer" in bad
    ok = msmigrate("run", "--resume", run_id, "--runs-dir", runs, "--set", "gate_train_iters=7", env=hook_env,
                   cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr


def test_user_errors_are_one_line(tmp_path, source_model, standin, hook_env):
    runs = tmp_path / "runs"
    line = _one_error_line(msmigrate("run", "--resume", "nope-123", "--runs-dir", runs, env=hook_env, cwd=tmp_path))
    assert "nope-123" in line and str(runs.resolve()) in line and "--runs-dir" in line

    spec = write_spec(tmp_path / "spec.yaml", source_model, standin)
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    line = _one_error_line(msmigrate("run", spec, "--runs-dir", blocker / "runs", env=hook_env, cwd=tmp_path))
    assert "cannot write the run folder" in line and "--runs-dir" in line

    assert "did you mean 'rules'" in _one_error_line(msmigrate("run", spec, "--policy", "rulez", env=hook_env,
                                                               cwd=tmp_path))
    spec.write_text(spec.read_text() + "budget: {launches: 2}\n")
    assert "did you mean 'budgets'" in _one_error_line(msmigrate("run", spec, env=hook_env, cwd=tmp_path))


def _run_held_at(gate, tmp_path, source_model, standin, hook_env):
    """``msmigrate run`` in its own session with the fake ``gate`` held in flight: (process, runs dir, run id) once
    the gate says it is held."""
    import time

    spec = write_spec(tmp_path / "spec.yaml", source_model, standin)
    runs, holds = tmp_path / "runs", tmp_path / "holds"
    env = {**hook_env, "FAKE_GATE_HOLD_DIR": str(holds), "FAKE_SLOW_GATES": gate}
    proc = subprocess.Popen([sys.executable, "-m", "msmigrate.faces.cli", "run", str(spec), "--runs-dir", str(runs)],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=as_terminal_foreground_job)
    deadline = time.monotonic() + 240
    while not list(holds.glob(f"*.{gate}.held")):
        assert proc.poll() is None and time.monotonic() < deadline, f"the run never reached {gate}"
        time.sleep(0.1)
    return proc, runs, next(holds.glob(f"*.{gate}.held")).name.split(f".{gate}.held")[0]


def test_sigterm_stops_a_headless_run_with_its_report_and_the_resume_command(tmp_path, source_model, standin,
                                                                              hook_env):
    """SIGTERM (a scheduler's time limit, ``timeout``, ``kill``) while a gate is in flight ends like Ctrl-C: exit 130,
    ``verification_report.md`` + ``evidence.json`` saying stopped_by_user, and the command that resumes it. Before,
    the default action killed the process and left no report."""
    import signal

    proc, runs, run_id = _run_held_at("G2", tmp_path, source_model, standin, hook_env)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert f"msmigrate run --resume {run_id} --runs-dir {runs.resolve()}" in " ".join(err.split()), err
    evidence = json.loads((runs / run_id / "evidence.json").read_text())
    assert evidence["exit_status"] == "stopped_by_user" and "G2" not in evidence["gates"], evidence["gates"]
    assert (runs / run_id / "verification_report.md").read_text().startswith("**stopped_by_user**")


def test_headless_ctrl_c_prints_the_resume_command_that_finishes_the_run(tmp_path, source_model, standin, hook_env):
    """Ctrl-C (SIGINT to the foreground group) while G4 is in flight: exit 130 and one line with the exact command
    that resumes the run; that command, pasted, finishes it."""
    import os
    import signal

    proc, runs, run_id = _run_held_at("G4", tmp_path, source_model, standin, hook_env)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=600)  # the stop waits for the current step: a G4 with training parity
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    line = " ".join(err.split())
    command = f"msmigrate run --resume {run_id} --runs-dir {runs.resolve()}"
    assert f"resumes from its last finished step with: {command}" in line, err
    again = msmigrate(*shlex.split(command)[1:], env=hook_env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["exit_status"] == "success"
