"""Launcher: command shapes, per-run YAML, journal/resume, streaming, early stop and timeouts.

Runs use script mode with small bash scripts that print real-format log lines (fast, no torch); the torchrun path
is covered by the integration tests in test_launcher_integration.py."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from msmigrate.core.run_context import RunContext
from msmigrate.tools.launcher import (
    DeviceInfo, LaunchSpec, build_command, expand_dotted, find_finished_launch, interrupted_launches, launch,
    mask_env, materialize_config, read_launches, resolve_device,
)
from msmigrate.tools.launcher.command import CPU_SHIM, SOURCE_THEN_EXEC, deep_merge
from msmigrate.tools.launcher.device import detect_device
from msmigrate.tools.launcher.records import append_event

DATA = Path(__file__).resolve().parents[1] / "data"
ITER = (
    "[Rank 0 | Local Rank 0] 2026-11-30 04:01:23,292 INFO [mindspeed_mm.fsdp.train.train_engine:48] =>  "
    "[2026-11-30 04:01:23] iteration {i:8d}/{n:8d} | consumed samples: {c:12d} | elapsed time per iteration (ms): "
    "100.0 | learning rate: 1.000000E-04 | global batch size:     2 | loss: {loss} | grad norm: 1.000 |"
)
CPU = DeviceInfo(kind="cpu", count=0)


def _ctx(tmp_path: Path) -> RunContext:
    target = tmp_path / "target"
    (target / "examples" / "m").mkdir(parents=True, exist_ok=True)
    return RunContext(run_id="r1", run_dir=tmp_path / "run", source=tmp_path / "src", target=target, model_name="m")


def _script(ctx: RunContext, name: str, body: str) -> str:
    path = ctx.target / "examples" / "m" / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return f"examples/m/{name}"


def _iter_lines(n: int, losses=None) -> str:
    losses = losses or [f"{5.0 - 0.1 * i:.6E}" for i in range(1, n + 1)]
    return "".join(f"echo '{ITER.format(i=i, n=n, c=2 * i, loss=losses[i - 1])}'\n" for i in range(1, n + 1))


# ---------------------------------------------------------------- pure parts
def test_expand_dotted_and_merge():
    over = expand_dotted({"training.train_iters": 5, "model": {"freeze": ["a"]}, "parallel.fsdp_plan.param_dtype": "fp32"})
    assert over == {"training": {"train_iters": 5}, "model": {"freeze": ["a"]},
                    "parallel": {"fsdp_plan": {"param_dtype": "fp32"}}}
    base = {"training": {"train_iters": 100, "lr": 1e-4}, "model": {"freeze": ["x", "y"]}}
    merged = deep_merge(base, over)
    assert merged["training"] == {"train_iters": 5, "lr": 1e-4} and merged["model"]["freeze"] == ["a"]
    assert base["training"]["train_iters"] == 100  # the base is not mutated
    with pytest.raises(ValueError):
        expand_dotted({"a": 1, "a.b": 2})


def test_materialize_config_resolves_anchors(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text("defaults: &d {lr: 1.0e-4}\ntraining:\n  <<: *d\n  train_iters: 100\n")
    path, sha = materialize_config(base, {"training.train_iters": 3}, tmp_path / "out" / "config.yaml")
    data = yaml.safe_load(path.read_text())
    assert data["training"] == {"lr": 1e-4, "train_iters": 3} and "&" not in path.read_text() and len(sha) == 64


def test_command_shapes(tmp_path):
    target, cfg = tmp_path / "t", tmp_path / "run.yaml"
    spec = LaunchSpec(gate="G6", config="x.yaml", nproc=2)
    cpu = build_command(spec, "cpu", CPU, target=target, runtime_python="/py", config_path=cfg, port=29511)
    assert cpu.argv == ["/py", "-m", "torch.distributed.run", "--nproc_per_node", "2", "--nnodes", "1", "--node_rank",
                        "0", "--master_addr", "127.0.0.1", "--master_port", "29511", str(CPU_SHIM),
                        str(target / "mindspeed_mm/fsdp/train/trainer.py"), str(cfg)]
    assert cpu.env["NON_MEGATRON"] == "true" and cpu.env["PYTHONPATH"].split(os.pathsep)[0] == str(target)
    assert cpu.cwd == str(target)
    npu_info = DeviceInfo(kind="npu", count=8, cann_set_env=["/opt/cann/set_env.sh", "/opt/atb/set_env.sh"])
    npu = build_command(LaunchSpec(gate="G6", config="x", nproc=4, visible_devices=[4, 5, 6, 7]), "npu", npu_info,
                        target=target, runtime_python="/py", config_path=cfg, port=1)
    assert npu.argv[:5] == ["bash", "-c", SOURCE_THEN_EXEC, "msmigrate-launch", "/opt/cann/set_env.sh"]
    assert npu.argv[5:10] == ["bash", "-c", SOURCE_THEN_EXEC, "msmigrate-launch", "/opt/atb/set_env.sh"]
    assert str(CPU_SHIM) not in npu.argv and npu.argv[-2:] == [str(target / "mindspeed_mm/fsdp/train/trainer.py"), str(cfg)]
    assert npu.env["ASCEND_RT_VISIBLE_DEVICES"] == "4,5,6,7" and npu.env["HCCL_CONNECT_TIMEOUT"] == "1200"
    cuda = build_command(spec, "cuda", DeviceInfo(kind="cuda", count=2), target=target, runtime_python="/py",
                         config_path=cfg, port=1)
    assert cuda.env["CUDA_VISIBLE_DEVICES"] == "0,1" and cuda.argv[0] == "/py"
    script = build_command(LaunchSpec(gate="G6", script="examples/m/finetune_m.sh", nproc=2), "cpu", CPU,
                           target=target, runtime_python="/py", config_path=None, port=6001)
    assert script.argv == ["bash", str((target / "examples/m/finetune_m.sh").resolve())]
    assert script.env["NPUS_PER_NODE"] == "2" and script.env["MASTER_PORT"] == "6001"
    with pytest.raises(ValueError):
        build_command(LaunchSpec(gate="G6", script="../../etc/x.sh"), "cpu", CPU, target=target,
                      runtime_python="/py", config_path=None, port=1)
    with pytest.raises(ValueError, match="BASH_ENV"):
        build_command(LaunchSpec(gate="G6", config="x", env={"BASH_ENV": "/tmp/evil"}), "cpu", CPU, target=target,
                      runtime_python="/py", config_path=cfg, port=1)


def test_mask_env_and_resolve_device():
    masked = mask_env({"OPENAI_API_KEY": "sk-1", "HF_TOKEN": "t", "DB_PASSWORD": "p", "my_secret": "s", "PATH": "/b"})
    assert masked == {"OPENAI_API_KEY": "***", "HF_TOKEN": "***", "DB_PASSWORD": "***", "my_secret": "***",
                      "PATH": "/b"}
    assert resolve_device("auto", CPU) == ("cpu", None)
    kind, err = resolve_device("npu", CPU)
    assert err and "offers cpu" in err
    assert resolve_device("cpu", DeviceInfo(kind="npu", count=8)) == ("cpu", None)


def test_detect_device_with_fake_npu_smi(tmp_path):
    fake = tmp_path / "bin" / "npu-smi"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = info ] && cat '{DATA / 'npu_smi' / 'npu_smi_info_910b_4.txt'}'\n")
    fake.chmod(0o755)
    set_env = tmp_path / "cann" / "set_env.sh"
    set_env.parent.mkdir()
    set_env.write_text("export ASCEND_FAKE=1\n")
    info = detect_device(sys.executable, tmp_path, env_extra={
        "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}", "MSMIGRATE_CANN_SET_ENV": str(set_env),
    })
    assert [n["id"] for n in info.npu_smi_npus] == [0, 1, 2, 3]
    assert info.npu_smi_npus[3] == {"id": 3, "name": "910B3", "health": "Warning", "hbm_used_mb": 40211,
                                    "hbm_total_mb": 65536}
    assert info.cann_set_env == [str(set_env)]
    assert info.kind == "cpu" and info.torch_npu["importable"] is False  # no torch_npu here: NPUs unusable
    assert any("npu-smi lists 4 NPU(s)" in w for w in info.warnings)
    assert info.mindspeed_mm["importable"] is False


# ---------------------------------------------------------------- runs (script mode)
def test_successful_launch_journal_and_reuse(tmp_path):
    ctx = _ctx(tmp_path)
    script = _script(ctx, "finetune_m.sh", 'echo "ranks=$NPUS_PER_NODE port=$MASTER_PORT nm=$NON_MEGATRON"\n'
                     + _iter_lines(5))
    seen = []
    res = launch(ctx, LaunchSpec(gate="G6", script=script, nproc=2, env={"HF_TOKEN": "hf_secret"}),
                 on_progress=lambda rec: seen.append(rec.iteration), device_info=CPU)
    assert res.ok, res.error
    d = res.data
    assert d["status"] == "succeeded" and d["exit_code"] == 0 and not d["reused"]
    assert seen == [1, 2, 3, 4, 5]
    full = json.loads(Path(d["summary_path"]).read_text())
    assert [p[0] for p in full["loss_curve"]] == [1, 2, 3, 4, 5] and full["steps"] == 5
    assert d["summary"]["steps"] == 5 and d["summary"]["loss_trend"] == "decreasing"
    log = Path(d["log_path"]).read_text()
    assert log.startswith("ranks=2 port=") and "nm=true" in log
    assert Path(d["log_path"]) == ctx.run_dir / "launches" / d["launch_id"] / "train.log"
    events = [json.loads(line) for line in (ctx.run_dir / "launches.jsonl").read_text().splitlines()]
    # the process tree is journaled as it appears (a resume finds every rank by it and by the environment tag)
    tree = [e for e in events if e["event"] == "processes"]
    events = [e for e in events if e["event"] != "processes"]
    assert [e["event"] for e in events] == ["started", "spawned", "finished"]
    assert events[0]["env"]["HF_TOKEN"] == "***" and "hf_secret" not in (ctx.run_dir / "launches.jsonl").read_text()
    assert isinstance(events[1]["pid"], int) and events[2]["exit_code"] == 0
    assert len(events[0]["tag"]) == 16 and tree and tree[0]["pids"][0][0] == events[1]["pid"]
    # an identical launch is not run again
    again = launch(ctx, LaunchSpec(gate="G6", script=script, nproc=2, env={"HF_TOKEN": "hf_secret"}), device_info=CPU)
    assert again.ok and again.data["reused"] and again.data["launch_id"] == d["launch_id"]
    assert len(read_launches(ctx.run_dir)) == 1
    assert find_finished_launch(ctx.run_dir, d["launch_key"]).exit_code == 0
    # another gate, or force, launches again
    other = launch(ctx, LaunchSpec(gate="G5", script=script, nproc=2), device_info=CPU)
    assert other.ok and not other.data["reused"] and other.data["launch_id"] != d["launch_id"]
    forced = launch(ctx, LaunchSpec(gate="G5", script=script, nproc=2, force=True), device_info=CPU)
    assert forced.data["attempt"] == 2 and forced.data["log_path"].endswith("train.attempt2.log")


def _echo_runtime(ctx, tmp_path: Path) -> None:
    """The runtime "python" is a script that records its argv and the YAML it got, so no torch is needed."""
    fake_py = tmp_path / "fakepy"
    fake_py.write_text('#!/bin/bash\necho "argv: $*"\ncat "${@: -1}"\n')
    fake_py.chmod(0o755)
    ctx.runtime_python = str(fake_py)


def test_trainer_mode_writes_run_yaml(tmp_path):
    ctx = _ctx(tmp_path)
    base = ctx.target / "examples" / "m" / "m_config.yaml"
    base.write_text("model:\n  attn_implementation: flash_attention_2\ntraining:\n  train_iters: 100\n  adam_fused: true\n")
    _echo_runtime(ctx, tmp_path)
    res = launch(ctx, LaunchSpec(gate="G4", config="examples/m/m_config.yaml",
                                 overrides={"training.train_iters": 5}, device="cpu"))
    assert not res.ok and res.data["exit_code"] == 0  # exit 0 but no iteration line: not a success
    assert res.data["summary"]["failure_signature"]["kind"] == "no_iterations"
    cfg = yaml.safe_load(Path(res.data["config_path"]).read_text())
    assert cfg["training"] == {"train_iters": 5, "adam_fused": False}
    assert cfg["model"]["attn_implementation"] == "sdpa"
    assert cfg["parallel"]["fsdp_plan"] == {"param_dtype": "fp32", "reduce_dtype": "fp32"}
    assert base.read_text().count("flash_attention_2") == 1  # the base YAML is untouched
    log = Path(res.data["log_path"]).read_text()
    assert "-m torch.distributed.run --nproc_per_node 2" in log and str(CPU_SHIM) in log
    assert not launch(ctx, LaunchSpec(gate="G4", config="missing.yaml", device="cpu")).ok
    assert not launch(ctx, LaunchSpec(gate="G4", script="x.sh", overrides={"a": 1}, device="cpu")).ok


def test_cpu_launch_loads_data_in_the_trainer_process_and_leaves_the_yaml_its_workers(tmp_path):
    """Forked dataloader workers change no batch (the sampler runs in the trainer's process) but each is a copy of
    the trainer (1.9 GB RSS at real scale, 8 per rank): a CPU launch sets num_workers 0 in its per-run YAML, unsets
    the keys torch refuses without workers, and the delivered YAML keeps its count; a device launch keeps all."""
    from msmigrate.tools.launcher.command import device_overrides

    ctx = _ctx(tmp_path)
    base = ctx.target / "examples" / "m" / "m_config.yaml"
    base.write_text("data:\n  dataloader_param:\n    num_workers: 8\n    prefetch_factor: 1\n    shuffle: true\n")
    _echo_runtime(ctx, tmp_path)
    res = launch(ctx, LaunchSpec(gate="G6", config="examples/m/m_config.yaml", device="cpu"))
    loader = yaml.safe_load(Path(res.data["config_path"]).read_text())["data"]["dataloader_param"]
    assert (loader["num_workers"], loader["prefetch_factor"], loader["shuffle"]) == (0, None, True)
    assert "persistent_workers" not in loader  # only keys the YAML sets are unset
    assert yaml.safe_load(base.read_text())["data"]["dataloader_param"]["num_workers"] == 8
    assert device_overrides("cuda", LaunchSpec(gate="G6", config="c.yaml"), yaml.safe_load(base.read_text())) == {}


def test_failed_launch_signature(tmp_path):
    ctx = _ctx(tmp_path)
    body = "cat '{}'\nexit 1\n".format(DATA / "logs" / "not_registered_childfailed.log")
    res = launch(ctx, LaunchSpec(gate="G6", script=_script(ctx, "f.sh", body), stop_on_fatal=False), device_info=CPU)
    assert not res.ok and res.data["status"] == "failed" and res.data["exit_code"] == 1
    assert "is not registered" in res.error
    assert res.data["summary"]["child_failure"]["rank"] == 0


def test_stops_early_on_fatal_and_kills_group(tmp_path):
    ctx = _ctx(tmp_path)
    marker = tmp_path / "child_alive"
    body = (
        f"(sleep 2; touch '{marker}') &\n"  # a grandchild that must die with the group
        + _iter_lines(1)
        + "echo 'RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB'\nsleep 30\n"
    )
    t0 = time.monotonic()
    res = launch(ctx, LaunchSpec(gate="G6", script=_script(ctx, "oom.sh", body), fatal_grace_s=0.5), device_info=CPU)
    assert time.monotonic() - t0 < 15
    assert res.data["status"] == "stopped_fatal" and res.data["summary"]["failure_signature"]["kind"] == "oom"
    time.sleep(2.5)  # the grandchild would have touched the marker by now had it survived
    assert not marker.exists()


def test_nonfinite_loss_stops(tmp_path):
    ctx = _ctx(tmp_path)
    body = _iter_lines(3, ["5.000000E+00", "NAN", "NAN"]) + "sleep 30\n"
    res = launch(ctx, LaunchSpec(gate="G4", script=_script(ctx, "nan.sh", body), fatal_grace_s=0.2), device_info=CPU)
    assert res.data["status"] == "stopped_fatal" and res.data["summary"]["loss_finite"] is False


def test_timeouts_and_cancel(tmp_path):
    ctx = _ctx(tmp_path)
    hang = _script(ctx, "hang.sh", "echo start\nsleep 30\n")
    res = launch(ctx, LaunchSpec(gate="G6", script=hang, no_output_timeout_s=0.5), device_info=CPU)
    assert res.data["status"] == "no_output_timeout" and res.data["exit_code"] != 0
    chatty = _script(ctx, "chatty.sh", "while true; do echo tick; sleep 0.1; done\n")
    res = launch(ctx, LaunchSpec(gate="G6", script=chatty, timeout_s=1.0), device_info=CPU)
    assert res.data["status"] == "timeout"
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    res = launch(ctx, LaunchSpec(gate="G7", script=chatty), device_info=CPU, cancel=cancel)
    assert res.data["status"] == "cancelled"
    # timeouts/cancels are not reused: the same launch runs again
    assert find_finished_launch(ctx.run_dir, res.data["launch_key"]) is None


def test_leftover_background_child_does_not_hang(tmp_path, monkeypatch):
    import msmigrate.tools.launcher.run as run_mod

    monkeypatch.setattr(run_mod, "DRAIN_AFTER_EXIT_S", 0.5)
    ctx = _ctx(tmp_path)
    body = "(sleep 30) &\n" + _iter_lines(2) + "exit 0\n"  # the sleeper inherits stdout and keeps it open
    t0 = time.monotonic()
    res = launch(ctx, LaunchSpec(gate="G6", script=_script(ctx, "bg.sh", body)), device_info=CPU)
    assert time.monotonic() - t0 < 10 and res.ok and res.data["exit_code"] == 0


def test_npu_launch_sources_cann_set_env(tmp_path):
    ctx = _ctx(tmp_path)
    set_env = tmp_path / "set_env.sh"
    # it also records the positional parameters it saw: the command must not leak into them
    set_env.write_text('export ASCEND_TOOLKIT_HOME=/fake/toolkit\nexport SEEN_ARGS="$#"\n')
    script = _script(ctx, "npu.sh", 'echo "home=$ASCEND_TOOLKIT_HOME vis=$ASCEND_RT_VISIBLE_DEVICES args=$SEEN_ARGS"\n'
                     + _iter_lines(2))
    info = DeviceInfo(kind="npu", count=8, cann_set_env=[str(set_env)])
    res = launch(ctx, LaunchSpec(gate="G6", script=script, nproc=2, device="npu"), device_info=info)
    assert res.ok, res.error
    assert Path(res.data["log_path"]).read_text().startswith("home=/fake/toolkit vis=0,1 args=0")


def test_interrupted_launch_is_visible(tmp_path):
    run_dir = tmp_path / "run"
    append_event(run_dir, {"event": "started", "launch_id": "g6-abc", "attempt": 1, "launch_key": "k", "argv": ["x"]})
    with open(run_dir / "launches.jsonl", "a") as fh:
        fh.write('{"event": "spawn')  # torn write of a crash
    (interrupted,) = interrupted_launches(run_dir)
    assert interrupted.launch_id == "g6-abc" and find_finished_launch(run_dir, "k") is None


def test_launch_tool_schema(tmp_path):
    from msmigrate.tools.launcher.tool import LaunchArgs, make_launch_tool

    ctx = _ctx(tmp_path)
    tool = make_launch_tool(ctx)
    assert set(LaunchArgs.model_fields) >= {"gate", "config_yaml", "overrides", "script", "nproc", "device"}
    assert "command" not in LaunchArgs.model_fields and "shell" not in LaunchArgs.model_fields
    out = json.loads(tool.invoke({"gate": "G4", "config_yaml": "nope.yaml", "device": "cpu"}))
    assert not out["ok"] and "config not found" in out["error"]


def test_callback_error_kills_job_and_is_journaled(tmp_path):
    ctx = _ctx(tmp_path)
    marker = tmp_path / "still_running"
    body = _iter_lines(1) + f"sleep 1; touch '{marker}'\n"

    def boom(rec):
        raise RuntimeError("callback bug")

    with pytest.raises(RuntimeError, match="callback bug"):
        launch(ctx, LaunchSpec(gate="G6", script=_script(ctx, "cb.sh", body)), on_progress=boom, device_info=CPU)
    (rec,) = read_launches(ctx.run_dir)
    assert rec.status == "launcher_error" and rec.finished
    time.sleep(1.5)  # long enough for the script to have touched the marker had it survived
    assert not marker.exists()


def test_reap_interrupted_kills_orphaned_job(tmp_path):
    """An agent killed mid-launch leaves the job running in its own session; the next launch reaps it."""
    import subprocess

    from msmigrate.tools.launcher import reap_interrupted

    run_dir = tmp_path / "run"
    argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    proc = subprocess.Popen(argv, start_new_session=True)
    append_event(run_dir, {"event": "started", "launch_id": "g6-x", "attempt": 1, "launch_key": "k", "argv": argv})
    append_event(run_dir, {"event": "spawned", "launch_id": "g6-x", "attempt": 1, "pid": proc.pid})
    (rec,) = reap_interrupted(run_dir)
    assert rec.pid == proc.pid
    proc.wait(timeout=5)  # ended (SIGTERM, then SIGKILL after a grace); the reaper may have reaped its status
    assert not Path(f"/proc/{proc.pid}").exists() or "Z" in Path(f"/proc/{proc.pid}/stat").read_text().split()[2]
    closed = json.loads((run_dir / "launches.jsonl").read_text().splitlines()[-1])
    assert closed["event"] == "finished" and closed["ended_pids"] == [proc.pid]
    (after,) = read_launches(run_dir)
    assert after.status == "interrupted" and not interrupted_launches(run_dir)
    assert find_finished_launch(run_dir, "k") is None  # retryable: the launch will run again
    # a recycled pid that runs something else is left alone
    other = subprocess.Popen(["sleep", "5"], start_new_session=True)
    append_event(run_dir, {"event": "started", "launch_id": "g6-y", "attempt": 1, "launch_key": "k2", "argv": argv})
    append_event(run_dir, {"event": "spawned", "launch_id": "g6-y", "attempt": 1, "pid": other.pid})
    reap_interrupted(run_dir)
    assert other.poll() is None
    other.kill()


def test_cpu_launch_keeps_an_attention_the_yaml_asks_for_that_runs_on_cpu():
    """A class with no sdpa path gets eager in the draft; the CPU overrides must not give it sdpa back (got_ocr2 in
    the open-world sweep failed G4 that way). Flash attention, which needs a device, is still replaced."""
    from msmigrate.tools.launcher.command import device_overrides

    spec = LaunchSpec(gate="G4", config="c.yaml")
    assert "attn_implementation" not in device_overrides("cpu", spec, {"model": {"attn_implementation": "eager"}})["model"]
    assert device_overrides("cpu", spec, {"model": {"attn_implementation": "flash_attention_2"}})["model"] == \
        {"attn_implementation": "sdpa"}
    assert device_overrides("cpu", spec, {})["model"] == {"attn_implementation": "sdpa"}
    assert device_overrides("npu", spec, {"model": {"attn_implementation": "eager"}}) == {}
