"""runtime_facts: the env probe's result as the lines the classify prompt shows."""

import json
from pathlib import Path

from msmigrate.agent.runtime_facts import MAX_ENV_VARS, runtime_facts

NPU_SMI = Path(__file__).resolve().parents[1] / "data" / "npu_smi" / "npu_smi_info_910b_4.txt"


def _probe_module():
    import importlib.util

    from msmigrate.tools.runtime import PROBES_DIR
    spec = importlib.util.spec_from_file_location("env_probe", PROBES_DIR / "env_probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_ascend_runtime_shows_versions_torch_npu_chips_memory_and_variables():
    probe = _probe_module()
    runtime = {"python": "3.10.14", "torch": "2.7.1", "transformers": "4.57.0",
               "packages": {"accelerate": "1.10.0", "peft": None},
               "torch_npu": {"found": True, "importable": True, "version": "2.7.1"}, "npu_count": 4,
               "npu_smi": probe.parse_npu_smi(NPU_SMI.read_text()), "device": "npu",
               "cann_set_env": ["/usr/local/Ascend/ascend-toolkit/set_env.sh"],
               "ascend_env": {"ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3", "HCCL_API_TOKEN": "hunter2hunter2"}}
    lines = runtime_facts(runtime)
    assert lines[0] == "installed: python 3.10.14, torch 2.7.1, transformers 4.57.0, accelerate 1.10.0"
    assert "torch_npu: 2.7.1 (imports)" in lines
    device = next(line for line in lines if line.startswith("device:"))
    assert device.startswith("device: npu x4; npu-smi lists 4 NPU(s)") and "health OK, Warning" in device
    assert "HBM 65536 MB each" in device
    assert "CANN set_env.sh: /usr/local/Ascend/ascend-toolkit/set_env.sh" in lines
    env = next(line for line in lines if line.startswith("ASCEND_/HCCL_ variables:"))
    assert "ASCEND_RT_VISIBLE_DEVICES=0,1,2,3" in env and "hunter2hunter2" not in json.dumps(lines)


def test_a_torch_npu_that_does_not_import_and_a_cpu_runtime_are_said_plainly():
    lines = runtime_facts({"python": "3.11.7", "torch": "2.7.1", "device": "cpu",
                           "torch_npu": {"found": True, "importable": False,
                                         "error": "ImportError: libhccl.so: cannot open shared object file"},
                           "cann_set_env": [], "warnings": ["npu-smi lists 8 NPU(s) but torch_npu is not usable"]})
    assert "torch_npu: installed but does not import: ImportError: libhccl.so: cannot open shared object file" in lines
    assert "device: cpu" in lines and "CANN set_env.sh: none found" in lines
    assert lines[-1] == "probe warning: npu-smi lists 8 NPU(s) but torch_npu is not usable"
    assert runtime_facts({"device": {"kind": "cpu"}}) == ["device: cpu"]  # the launcher's device record
    assert runtime_facts(None) == [] and runtime_facts({}) == []


def test_many_runtime_variables_are_cut_with_a_count():
    env = {f"HCCL_VAR_{i:02d}": str(i) for i in range(MAX_ENV_VARS + 3)}
    (line,) = runtime_facts({"ascend_env": env})
    assert line.endswith("(and 3 more)") and line.count("=") == MAX_ENV_VARS


def test_the_env_probe_reads_package_versions_from_metadata_only():
    found = _probe_module().package_versions(("pytest", "surely-not-an-installed-distribution"))
    assert found["pytest"] and found["surely-not-an-installed-distribution"] is None
