"""``msmigrate batch``: a 3-item batch with --jobs 2 survives a SIGKILL of its process group and resumes without
redoing finished items; a broken item becomes its exit status; launch slots are a cross-process semaphore."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_run import held_marker, release_file
from run_dirs import as_terminal_foreground_job, write_spec

from msmigrate.agent.launch_slots import launch_slots
from msmigrate.faces.batch.manifest import load_manifest
from msmigrate.agent.launch_slots import slot_env
from msmigrate.tools.worktree import checkout_state


def batch_cmd(manifest: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "msmigrate.faces.cli", "batch", str(manifest), *extra]


def read_state(batch_dir: Path) -> dict:
    path = batch_dir / "batch_state.json"
    return json.loads(path.read_text())["items"] if path.is_file() else {}


def run_ids(batch_dir: Path) -> dict[str, str]:
    """Each item's run id, as the batch drew it (``<item>-<attempt>-<random>``) and recorded it."""
    return {k: v["run"] for k, v in read_state(batch_dir).items() if v.get("run")}


def drives(run_dir: Path) -> int:
    lines = (run_dir / "trajectory.jsonl").read_text().splitlines()
    return sum(1 for ln in lines if json.loads(ln)["kind"] == "drive")


def gates_recorded(run_dir: Path) -> bool:
    traj = run_dir / "trajectory.jsonl"
    return traj.is_file() and '"kind": "gate"' in traj.read_text()


def test_batch_three_items_killed_and_resumed(tmp_path, source_model, standin, hook_env):
    spec = write_spec(tmp_path / "qwen.yaml", source_model, standin)
    manifest = tmp_path / "manifest.yaml"
    # Three items on ONE target checkout: each run works in its own git worktree of it, on its own branch.
    manifest.write_text(
        "items:\n"
        f"  - spec: {spec.name}\n"
        "  - id: second\n"
        f"    spec: {{source: {source_model}, target: {standin}, model_name: qwen2_vl_b}}\n"
        "  - id: third\n"
        f"    spec: {{source: {source_model}, target: {standin}, model_name: qwen2_vl_c}}\n")
    batch_dir = tmp_path / "b"
    user_state = checkout_state(standin)
    # G4 of every item is held until its release file exists; the first item's is there from the start, so the
    # kill lands when that item is done and another is held in G4 (past G0–G3): no sleep decides the window
    holds = tmp_path / "holds"
    holds.mkdir()
    env = {**hook_env, "FAKE_GATE_HOLD_DIR": str(holds), "FAKE_SLOW_GATES": "G4"}
    proc = subprocess.Popen(batch_cmd(manifest, "--jobs", "2", "--batch-dir", str(batch_dir)), env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    wait_until(lambda: len(run_ids(batch_dir)) == 3, proc, "the batch never drew its run ids")
    rid = run_ids(batch_dir)
    release_file(holds, rid["qwen2_vl"]).touch()
    wait_until(lambda: read_state(batch_dir).get("qwen2_vl", {}).get("status") == "done" and any(
        held_marker(holds, rid[k], "G4").is_file() for k in ("second", "third")), proc,
        "the first item never finished while another was held in G4")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = read_state(batch_dir)
    done_before = {k for k, v in before.items() if v["status"] == "done"}
    # an item may have written its result just before the kill (its process still tearing down): it is finished,
    # and the re-run takes that result instead of resuming it
    finished_unrecorded = {k for k, v in before.items() if v["status"] == "running"
                           and (batch_dir / "results" / f"{rid[k]}.json").is_file()}
    interrupted = {k for k, v in before.items() if v["status"] == "running"
                   and gates_recorded(batch_dir / "runs" / rid[k])} - finished_unrecorded
    assert done_before and interrupted
    assert all(before[k]["exit_status"] == "success" for k in done_before)
    result_mtimes = {k: (batch_dir / "results" / f"{rid[k]}.json").stat().st_mtime for k in done_before}

    out = subprocess.run(batch_cmd(manifest, "--jobs", "2", "--batch-dir", str(batch_dir)),
                         env={**hook_env, "COLUMNS": "200"}, cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    summary = json.loads((batch_dir / "summary.json").read_text())
    assert summary["succeeded"] == 3 and summary["total"] == 3
    assert {r["id"] for r in summary["items"]} == {"qwen2_vl", "second", "third"}
    assert run_ids(batch_dir) == rid  # a resume keeps the run id it was started with
    assert f"| qwen2_vl | {rid['qwen2_vl']} | success | ✔✔✔✔✔✔✔ |" in (batch_dir / "summary.md").read_text()
    for k in done_before:  # finished items were skipped: same result file, one drive in their run
        assert (batch_dir / "results" / f"{rid[k]}.json").stat().st_mtime == result_mtimes[k]
        assert drives(batch_dir / "runs" / rid[k]) == 1
    for k in finished_unrecorded:
        assert drives(batch_dir / "runs" / rid[k]) == 1
    for k in interrupted:  # interrupted items continued from their checkpoint
        result = json.loads((batch_dir / "results" / f"{rid[k]}.json").read_text())
        assert result["resumed"] is True and result["exit_status"] == "success"
        assert drives(batch_dir / "runs" / rid[k]) == 2
    # each item committed on its own branch of the shared target; the user's checkout itself never changed
    assert checkout_state(standin) == user_state
    for k, name in (("qwen2_vl", "qwen2_vl"), ("second", "qwen2_vl_b"), ("third", "qwen2_vl_c")):
        files = subprocess.run(["git", "-C", str(standin), "ls-tree", "-r", "--name-only", f"msmigrate/{rid[k]}"],
                               capture_output=True, text=True, check=True).stdout
        assert f"mindspeed_mm/fsdp/models/{name}/__init__.py" in files
        assert not (batch_dir / "runs" / rid[k] / "worktree").exists()  # released when the run ended


def test_batch_item_failure_is_its_exit_status(tmp_path, source_model, standin, hook_env):
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        f"- id: broken\n  spec: {{source: {tmp_path / 'nowhere'}, target: {standin}, model_name: ghost}}\n")
    out = subprocess.run(batch_cmd(manifest, "--batch-dir", str(tmp_path / "b")), env=hook_env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr
    summary = json.loads(out.stdout)
    assert summary["items"][0]["exit_status"] == "precheck_failed"
    # a second invocation skips it (finished, even though it failed) unless --redo
    again = subprocess.run(batch_cmd(manifest, "--batch-dir", str(tmp_path / "b")), env=hook_env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert "1 already done, 0 to run" in again.stderr
    redo = subprocess.run(batch_cmd(manifest, "--batch-dir", str(tmp_path / "b"), "--redo"), env=hook_env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert json.loads(redo.stdout)["items"][0]["run_id"].startswith("broken-2-")


def test_manifest_errors_and_ids(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("items: []\n")
    assert "non-empty" in load_manifest(bad).error
    ok = tmp_path / "ok.yaml"
    ok.write_text("defaults: {policy: llm}\nitems:\n"
                  "  - spec: {source: s, target: t, model_name: abc}\n"
                  "  - spec: {source: s, target: t, model_name: abc, policy: rules}\n")
    m = load_manifest(ok)
    assert m.error is None
    assert [i.id for i in m.items] == ["abc", "abc-2"]
    assert [i.spec.policy for i in m.items] == ["llm", "rules"]
    assert m.items[0].spec.source == (tmp_path / "s").resolve()


def test_launch_slots_limit_holders(tmp_path, monkeypatch):
    with launch_slots() as free:  # outside a batch: no limit
        assert free is None
    for k, v in slot_env(tmp_path / "slots", 1).items():
        monkeypatch.setenv(k, v)
    with launch_slots() as slot:
        assert slot == 0
        with pytest.raises(TimeoutError):  # the only slot is held (flock is per open file, even in one process)
            with launch_slots(timeout_s=0.3, poll_s=0.05):
                pass
    with launch_slots(timeout_s=0.3) as slot:  # released on exit
        assert slot == 0


def test_kill_9_of_the_batch_alone_does_not_start_a_second_copy(tmp_path, source_model, standin, hook_env):
    """kill -9 of the batch process (not its group) leaves the item processes running; the re-run waits for them,
    says so, and takes their results — each run was driven once. The item logs hold the items' progress."""
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(
        "items:\n"
        f"  - id: one\n    spec: {{source: {source_model}, target: {standin}, model_name: qwen2_vl}}\n"
        f"  - id: two\n    spec: {{source: {source_model}, target: {standin}, model_name: qwen2_vl_b}}\n")
    batch_dir = tmp_path / "b"
    holds = tmp_path / "holds"  # both items' G4 stay in flight until the test releases them
    env = {**hook_env, "FAKE_GATE_HOLD_DIR": str(holds), "FAKE_SLOW_GATES": "G4"}
    proc = subprocess.Popen(batch_cmd(manifest, "--jobs", "2", "--batch-dir", str(batch_dir)), env=env,
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    wait_until(lambda: len(run_ids(batch_dir)) == 2 and all(
        held_marker(holds, run_ids(batch_dir)[k], "G4").is_file() for k in ("one", "two")), proc,
        "the two items were never held in G4 at once")
    rid = run_ids(batch_dir)
    os.kill(proc.pid, signal.SIGKILL)  # the batch only; its item processes live on
    proc.wait()
    err_file = tmp_path / "rerun.err"
    waiting = "still runs; waiting for it instead of starting a second copy"
    try:
        with open(err_file, "w") as err:
            rerun = subprocess.Popen(batch_cmd(manifest, "--jobs", "2", "--batch-dir", str(batch_dir)),
                                     env=hook_env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=err,
                                     text=True, stdin=subprocess.DEVNULL)
            # the survivors are released only once the re-run has found both of them alive
            wait_until(lambda: err_file.read_text().count(waiting) == 2, rerun,
                       "the re-run did not report both surviving item processes")
            release_file(holds).touch()
            rerun.communicate(timeout=300)
    finally:
        os.killpg(proc.pid, signal.SIGKILL) if _group_alive(proc.pid) else None
    stderr = err_file.read_text()
    assert rerun.returncode == 0, stderr
    assert stderr.count(waiting) == 2, stderr
    for k in ("one", "two"):
        assert drives(batch_dir / "runs" / rid[k]) == 1  # no second copy, no resume of a live run
        log = (batch_dir / "logs" / f"{rid[k]}.log").read_text()
        assert "gate G4 PASS" in log and "exit: success" in log, log
    assert json.loads((batch_dir / "summary.json").read_text())["succeeded"] == 2


def wait_until(condition, proc: subprocess.Popen, what: str, timeout_s: float = 240.0) -> None:
    """Poll ``condition`` until it holds; fail at once if ``proc`` exits first, and after a generous timeout."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            pytest.fail(f"{what}: the process exited ({proc.returncode}) first\n{out!s:.3000}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout_s:.0f} s")
        time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_two_batches_on_one_target_each_prove_their_own_run(tmp_path, source_model, standin, hook_env):
    """The same manifest run twice in two batch folders on one target: the second batch draws its own run ids,
    starts fresh (never adopts the first batch's branch), and its report shows its own commits."""
    manifest = tmp_path / "m.yaml"
    manifest.write_text(f"- id: one\n  spec: {{source: {source_model}, target: {standin}, model_name: qwen2_vl}}\n")
    rows = []
    for name in ("b1", "b2"):
        out = subprocess.run(batch_cmd(manifest, "--batch-dir", str(tmp_path / name)), env=hook_env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        rows.append(json.loads(out.stdout)["items"][0])
    first, second = rows
    assert first["run_id"] != second["run_id"] and first["run_id"].startswith("one-1-")
    result = json.loads((tmp_path / "b2" / "results" / f"{second['run_id']}.json").read_text())
    assert result["resumed"] is False and result["exit_status"] == "success"
    for row in rows:  # each branch holds its own run's commits, and its report says so
        log = subprocess.run(["git", "-C", str(standin), "log", "--oneline",
                              f"msmigrate/{row['run_id']}/base..msmigrate/{row['run_id']}"],
                             capture_output=True, text=True, check=True).stdout
        assert log.strip(), f"no commits of its own on msmigrate/{row['run_id']}"
        report = Path(row["report"]).read_text()
        assert "(no changes)" not in report and f"msmigrate/{row['run_id']}" in report


def test_ctrl_c_leaves_items_resumable_and_a_rerun_resumes_them(tmp_path, source_model, standin, hook_env):
    """Ctrl-C (SIGINT to the batch's foreground process group, items included) while both items are in G4: the
    items stay ``interrupted`` (not done / error), the batch says how to resume, and the same command resumes them
    from their checkpoints to success."""
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(
        "items:\n"
        f"  - id: one\n    spec: {{source: {source_model}, target: {standin}, model_name: qwen2_vl}}\n"
        f"  - id: two\n    spec: {{source: {source_model}, target: {standin}, model_name: qwen2_vl_b}}\n")
    batch_dir, holds = tmp_path / "b", tmp_path / "holds"
    env = {**hook_env, "FAKE_GATE_HOLD_DIR": str(holds), "FAKE_SLOW_GATES": "G4"}
    proc = subprocess.Popen(batch_cmd(manifest, "--jobs", "2", "--batch-dir", str(batch_dir)), env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=as_terminal_foreground_job)
    wait_until(lambda: len(run_ids(batch_dir)) == 2 and all(
        held_marker(holds, run_ids(batch_dir)[k], "G4").is_file() for k in ("one", "two")), proc,
        "the two items were never held in G4 at once")
    rid = run_ids(batch_dir)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C at a terminal sends: the whole foreground group
    _, err = proc.communicate(timeout=600)  # the stop waits for the current step: a G4 with training parity
    assert proc.returncode == 130, err
    state = read_state(batch_dir)
    assert {k: state[k]["status"] for k in ("one", "two")} == {"one": "interrupted", "two": "interrupted"}, state
    assert f"resume from their checkpoints with: msmigrate batch {manifest}" in " ".join(err.split())

    again = subprocess.run(batch_cmd(manifest, "--jobs", "2", "--batch-dir", str(batch_dir)), env=hook_env,
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 already done, 2 to run" in again.stderr
    for k in ("one", "two"):
        result = json.loads((batch_dir / "results" / f"{rid[k]}.json").read_text())
        assert result["resumed"] is True and result["exit_status"] == "success"
        assert drives(batch_dir / "runs" / rid[k]) == 2
