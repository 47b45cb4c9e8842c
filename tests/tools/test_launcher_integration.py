"""CPU preflight of the launcher on the stand-in target: real torchrun, 2 ranks, gloo, through the CPU shim."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from msmigrate.core.run_context import RunContext
from msmigrate.tools.launcher import LaunchSpec, detect_device, launch, read_launches

standin = pytest.importorskip("msmigrate.testbeds.standin")
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ctx(tmp_path_factory) -> RunContext:
    root = tmp_path_factory.mktemp("it")
    target = standin.write_standin(root / "target")
    return RunContext(run_id="it", run_dir=root / "run", source=root / "src", target=target, model_name="qwen3vl",
                      runtime_python=sys.executable)


def test_env_probe_sees_standin(ctx):
    info = detect_device(ctx.runtime_python, ctx.target)
    assert info.kind == "cpu" and info.error is None
    assert info.mindspeed_mm["importable"] is True  # NON_MEGATRON=true from the target root
    from msmigrate.tools.runtime import run_probe

    positional = run_probe(ctx.runtime_python, "env_probe", [str(ctx.target)])  # the form the prepare node uses
    assert positional.ok and positional.data["result"]["mindspeed_mm"]["importable"] is True


def test_cpu_preflight_runs_standin_example(ctx):
    progress = []
    spec = LaunchSpec(gate="G6", config="examples/qwen3vl/qwen3vl_config.yaml", nproc=2, device="cpu",
                      timeout_s=600, no_output_timeout_s=300)
    res = launch(ctx, spec, on_progress=progress.append)
    log = Path(res.data["log_path"]).read_text()
    assert res.ok, f"{res.error}\n{log[-3000:]}"
    summary = res.data["summary"]
    assert summary["steps"] >= 5 and summary["loss_finite"] and summary["completed"]
    assert summary["first_loss"] is not None and summary["median_step_ms"] > 0
    assert len(progress) == summary["steps"] and progress[-1].iteration == progress[-1].total
    argv = res.data["argv"]
    assert argv[1:3] == ["-m", "torch.distributed.run"] and argv[argv.index("--nproc_per_node") + 1] == "2"
    assert argv[-3].endswith("cpu_shim.py") and argv[-1] == res.data["config_path"]
    # a resumed run finds the finished identical launch and does not relaunch it
    again = launch(ctx, spec)
    assert again.ok and again.data["reused"] and len(read_launches(ctx.run_dir)) == 1


def test_cpu_preflight_failure_is_classified(ctx):
    spec = LaunchSpec(gate="G6", config="examples/qwen3vl/qwen3vl_config.yaml", nproc=2, device="cpu",
                      overrides={"model.model_id": "not_a_model"}, timeout_s=600, fatal_grace_s=10)
    res = launch(ctx, spec)
    assert not res.ok and res.data["exit_code"] != 0
    sig = res.data["summary"]["failure_signature"]
    assert sig["kind"] == "exception" and "ID 'not_a_model' is not registered." in sig["line"]


def test_a_taken_master_port_is_relaunched_once_on_a_fresh_port(ctx, monkeypatch):
    """Another process holds the port the launcher picked (a real listening socket on 127.0.0.1): torchrun's store
    cannot bind (EADDRINUSE). That is the host's flake: the attempt is journaled as ``port_in_use`` (retryable, not
    a verdict on the code) and the launch runs again on a fresh port."""
    import socket

    from msmigrate.tools.launcher import run as launcher_run
    from msmigrate.tools.launcher.command import free_port

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        picks = iter([busy])
        monkeypatch.setattr(launcher_run, "free_port", lambda: next(picks, None) or free_port())
        spec = LaunchSpec(gate="G6-port", config="examples/qwen3vl/qwen3vl_config.yaml", nproc=2, device="cpu",
                          overrides={"training.train_iters": 2}, timeout_s=600, no_output_timeout_s=300,
                          fatal_grace_s=5)
        res = launch(ctx, spec)
    attempts = [r for r in read_launches(ctx.run_dir) if r.launch_id == res.data["launch_id"]]
    assert [r.status for r in attempts] == ["port_in_use", "succeeded"], [(r.status, r.summary) for r in attempts]
    first_log = Path(attempts[0].log_path).read_text()
    assert "EADDRINUSE" in first_log or "address already in use" in first_log.lower()
    assert str(busy) in attempts[0].argv and str(busy) not in attempts[1].argv
    assert res.ok and res.data["attempt"] == 2 and res.data["port_collisions"] == [busy]
    assert any(f"master port {busy} was taken" in w for w in res.data["warnings"])
    # the flake is not a finished verdict: an identical launch later is not answered from the failed attempt
    from msmigrate.tools.launcher.records import RETRYABLE

    assert "port_in_use" in RETRYABLE


def test_a_port_the_spec_fixes_is_not_changed(ctx):
    """A master port given in the spec (several nodes must agree on it) is the user's: reported, not re-pointed."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        spec = LaunchSpec(gate="G6-fixed", config="examples/qwen3vl/qwen3vl_config.yaml", nproc=2, device="cpu",
                          overrides={"training.train_iters": 2}, master_port=busy, timeout_s=600, fatal_grace_s=5)
        res = launch(ctx, spec)
    assert not res.ok and res.data["status"] == "port_in_use" and res.data["attempt"] == 1
    assert res.data["port_collisions"] == [busy]
