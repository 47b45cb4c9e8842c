"""Launcher injection: every value that reaches an argv or a script — config path, overrides (keys and values),
launch script, gate, master address, env names and values, CANN's set_env.sh path, the tool's typed fields — is
tried with shell payloads. A payload either is refused or arrives as one literal argument / YAML value; no shell
ever evaluates it (a canary file would appear)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from msmigrate.agent.config import RunSpec
from msmigrate.core.run_context import RunContext
from msmigrate.tools.launcher import LaunchArgs, LaunchSpec, launch, make_launch_tool
from msmigrate.tools.launcher.device import DeviceInfo

CPU = DeviceInfo(kind="cpu", count=0)


def payloads(canary: Path) -> list[str]:
    c = str(canary)
    return [f"$(touch {c})", f"`touch {c}`", f"; touch {c}", f"| touch {c}", f"&& touch {c}", f"\n touch {c}",
            f"'; touch {c}; '", f'"; touch {c}; "', f"$({{touch,{c}}})", f"${{IFS}}touch${{IFS}}{c}"]


@pytest.fixture()
def world(tmp_path: Path):
    """A target with a trainer-shaped YAML and a fake runtime Python that records its argv and env."""
    target = tmp_path / "target"
    (target / "examples" / "m").mkdir(parents=True)
    (target / "examples/m/m_config.yaml").write_text("training:\n  train_iters: 6\nmodel:\n  model_id: m\n")
    record = tmp_path / "record"
    fake_py = tmp_path / "bin" / "python"
    fake_py.parent.mkdir()
    fake_py.write_text(f"#!/bin/bash\nprintf '%s\\0' \"$@\" > {record}.argv\nenv -0 > {record}.env\n")
    fake_py.chmod(0o755)
    ctx = RunContext(run_id="inj", run_dir=tmp_path / "run", source=tmp_path / "src", target=target, model_name="m",
                     runtime_python=str(fake_py))
    canary = tmp_path / "PWNED"
    return ctx, record, canary


def recorded(record: Path) -> tuple[list[str], dict[str, str]]:
    argv = [a for a in Path(f"{record}.argv").read_text().split("\0") if a]
    env = dict(kv.split("=", 1) for kv in Path(f"{record}.env").read_text().split("\0") if "=" in kv)
    return argv, env


def test_override_keys_and_values_land_in_yaml_literally(world):
    ctx, record, canary = world
    for i, p in enumerate(payloads(canary)):
        res = launch(ctx, LaunchSpec(gate="G4", config="examples/m/m_config.yaml", device="cpu", force=True,
                                     overrides={"training.note": p, f"extra.k{i}{p.strip()[:12]}": 1}),
                     device_info=CPU)
        assert res.data.get("config_path"), res.error
        data = yaml.safe_load(Path(res.data["config_path"]).read_text())
        assert data["training"]["note"] == p
        argv, _ = recorded(record)
        assert p not in " ".join(argv)  # values go into the YAML, never onto the command line
    assert not canary.exists()


def test_master_addr_and_env_values_are_single_literal_arguments(world):
    ctx, record, canary = world
    for p in payloads(canary):
        res = launch(ctx, LaunchSpec(gate="G6", config="examples/m/m_config.yaml", device="cpu", force=True,
                                     master_addr="127.0.0.1" + p, env={"MY_KNOB": p}), device_info=CPU)
        assert res.data.get("argv"), res.error
        argv, env = recorded(record)
        assert argv[argv.index("--master_addr") + 1] == "127.0.0.1" + p
        assert env["MY_KNOB"] == p
    assert not canary.exists()


def test_config_path_payloads_are_files_or_refusals(world):
    ctx, record, canary = world
    weird = ctx.target / "examples/m" / f"$(touch {canary.name});x.yaml"
    weird.write_text("training:\n  train_iters: 6\n")
    res = launch(ctx, LaunchSpec(gate="G4", config=str(weird.relative_to(ctx.target)), device="cpu"), device_info=CPU)
    argv, _ = recorded(record)
    assert not any("touch" in a for a in argv)  # the per-run copy under the run dir is what the trainer gets
    assert Path(res.data["config_path"]).parent.parent == ctx.run_dir / "launches"
    for p in payloads(canary):
        bad = launch(ctx, LaunchSpec(gate="G4", config="examples/m/m_config.yaml" + p, device="cpu"), device_info=CPU)
        assert not bad.ok and "config not found" in bad.error
    assert not canary.exists()


@pytest.mark.parametrize("script", ["examples/m/x.sh; touch PWNED", "examples/m/$(touch PWNED).sh", "/bin/sh",
                                    "examples/../../x.sh", "examples/m/../../../x.sh", "../x.sh", "x.sh",
                                    "examples/m/run.py", "examples/m/x.sh\n", "examples/m/link.sh",
                                    "mindspeed_mm/fsdp/train/run.sh"])
def test_launch_script_payloads_are_refused(world, script, tmp_path):
    ctx, record, canary = world
    outside = tmp_path / "outside.sh"
    outside.write_text(f"#!/bin/bash\ntouch {canary}\n")
    outside.chmod(outside.stat().st_mode | stat.S_IEXEC)
    os.symlink(outside, ctx.target / "examples/m/link.sh")
    res = launch(ctx, LaunchSpec(gate="G6", script=script, device="cpu"), device_info=CPU)
    assert not res.ok and res.error
    assert not canary.exists()


@pytest.mark.parametrize("gate", ["../../../tmp/x", "G4;touch PWNED", "G4/../../x", "/tmp/g", "G10", "g4", "", "G4-../x", "G4-a/b", "G4-.", "G4- x",
                                  "G4\n"])
def test_gate_is_a_name_never_a_path(world, gate):
    ctx, record, canary = world
    res = launch(ctx, LaunchSpec(gate=gate, config="examples/m/m_config.yaml", device="cpu"), device_info=CPU)
    assert not res.ok and "gate" in res.error
    assert not (ctx.run_dir / "launches").exists() or all(
        p.parent == ctx.run_dir / "launches" for p in (ctx.run_dir / "launches").iterdir())
    with pytest.raises(ValidationError):
        LaunchArgs(gate=gate)


@pytest.mark.parametrize("name", ["LD_PRELOAD", "BASH_ENV", "ENV", "BASH_FUNC_ls%%", "PYTHONSTARTUP", "LD_AUDIT",
                                  "PROMPT_COMMAND", "PS4", "SHELLOPTS"])
def test_code_running_env_names_are_refused(world, name):
    ctx, record, canary = world
    res = launch(ctx, LaunchSpec(gate="G4", config="examples/m/m_config.yaml", device="cpu",
                                 env={name: f"() {{ touch {canary}; }}"}), device_info=CPU)
    assert not res.ok and name in res.error
    assert not canary.exists()


def test_cann_set_env_path_is_a_positional_argument(world, tmp_path):
    ctx, record, canary = world
    odd = tmp_path / f"cann $(touch {canary.name}); x" / "set_env.sh"
    odd.parent.mkdir()
    odd.write_text("export ASCEND_FROM_SET_ENV=1\n")
    info = DeviceInfo(kind="npu", count=2, cann_set_env=[str(odd)])
    res = launch(ctx, LaunchSpec(gate="G6", config="examples/m/m_config.yaml", device="npu", nproc=2),
                 device_info=info)
    assert res.data.get("argv"), res.error
    argv, env = recorded(record)
    assert env.get("ASCEND_FROM_SET_ENV") == "1"  # sourced, as a file argument
    assert argv[:2] == ["-m", "torch.distributed.run"]
    assert not canary.exists()


def test_typed_tool_fields_refuse_non_values(world):
    ctx, _, canary = world
    tool = make_launch_tool(ctx)
    for bad in ({"gate": "G4", "nproc": "2; touch x"}, {"gate": "G4", "timeout_s": "1 && x"},
                {"gate": "../x"}, {"gate": "G4", "force": "rm -rf"}):
        with pytest.raises(ValidationError):
            LaunchArgs(**bad)
    out = json.loads(tool.invoke({"gate": "G5", "config_yaml": "examples/m/m_config.yaml; touch x",
                                  "device": "cpu"}))
    assert out["ok"] is False
    assert not canary.exists()


@pytest.mark.parametrize("name", ["x; rm -rf ~", "../x", "a/b", "$(id)", "A", "x" * 41, "x\n"])
def test_model_name_reaching_paths_and_refs_is_validated(name):
    with pytest.raises(ValidationError):
        RunSpec(source="/s", target="/t", model_name=name)
