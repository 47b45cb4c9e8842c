"""Context rules for a failure whose cause is the target runtime's process environment or installed library while
the message reads like the data path's: a value the error quotes that a variable of the runtime's environment holds
(a variable the target's own code reads, set to another value than its default), and an image decode error the
source's own processor met in the same runtime on records whose files decode outside it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import msmigrate
from msmigrate.knowledge.failure_context import (Artifacts, backend_env_owner, runtime_decode_owner, runtime_env_owner,
                                                 warning_raised_owner)

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"
STANDIN = Path(msmigrate.__file__).parent / "testbeds" / "standin" / "tree"
MM_PLUGIN = "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py"
# the data path's own check of a sample's placeholders, as the target raises it (a traceback through its mm_plugin)
COUNT = (f'Traceback (most recent call last):\n  File "{MM_PLUGIN}", line 51, in _validate_messages\n'
         "ValueError: The number of images does not match the number of <img> tokens in [{'role': 'user', "
         "'content': '<image>Describe the image.'}, {'role': 'assistant', 'content': 'A red square.'}].")
ENV = {"IMAGE_PLACEHOLDER": ("<img>", "<image>")}


def artifacts(**over) -> Artifacts:
    return Artifacts(model=("mindspeed_mm/fsdp/models/qwen2_vl",), data=("mindspeed_mm/fsdp/data",),
                     config=("examples/qwen2_vl/qwen2_vl_config.yaml",), **over)


def test_a_quoted_value_the_runtimes_environment_gave_a_variable_the_target_reads_is_environment():
    verdict = runtime_env_owner(COUNT, artifacts(runtime_env=ENV))
    assert (verdict.owner, verdict.rule) == ("environment", "runtime-env")
    assert "IMAGE_PLACEHOLDER" in verdict.reason and "`<image>`" in verdict.reason
    # without the runtime's variable (G0 found none set) the same message decides nothing here
    assert runtime_env_owner(COUNT, artifacts()) is None


def test_the_variable_does_not_decide_when_the_run_sets_it_or_it_holds_the_codes_default_or_is_not_quoted():
    assert runtime_env_owner(COUNT, artifacts(runtime_env=ENV), script_sets=["IMAGE_PLACEHOLDER"]) is None
    assert runtime_env_owner(COUNT, artifacts(runtime_env={"IMAGE_PLACEHOLDER": ("<image>", "<image>")})) is None
    # the YAML holding the same value: either could have supplied it
    assert runtime_env_owner(COUNT, artifacts(runtime_env=ENV, yaml_values={"data.x": "<img>"})) is None
    other = COUNT.replace("<img>", "<image>")
    assert runtime_env_owner(other, artifacts(runtime_env=ENV)) is None


def test_the_env_probe_reads_the_variables_the_targets_code_reads_and_their_values_in_a_ranks_view():
    sys.path.insert(0, str(PROBES))
    try:
        import env_probe
    finally:
        sys.path.remove(str(PROBES))
    reads = env_probe.target_env_reads(STANDIN)
    assert reads["IMAGE_PLACEHOLDER"] == "<image>" and reads["NON_MEGATRON"] == ""
    old = os.environ.get("IMAGE_PLACEHOLDER")
    os.environ["IMAGE_PLACEHOLDER"] = "<img>"
    try:
        view = env_probe.rank_view(sys.executable, sorted(reads))
    finally:
        os.environ.pop("IMAGE_PLACEHOLDER") if old is None else os.environ.__setitem__("IMAGE_PLACEHOLDER", old)
    assert view["read_env"]["IMAGE_PLACEHOLDER"] == "<img>"
    assert "PYTHONWARNINGS" in env_probe.INTERPRETER_ENV  # asked of the rank's view besides the target's reads


def test_a_credential_like_variable_the_target_reads_is_never_recorded(tmp_path):
    sys.path.insert(0, str(PROBES))
    try:
        import env_probe
    finally:
        sys.path.remove(str(PROBES))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text('import os\nA = os.getenv("WANDB_API_KEY")\n'
                                                  'B = os.environ.get("MM_MODE", "fast")\nC = os.environ["MM_ROOT"]\n')
    assert env_probe.target_env_reads(tmp_path) == {"MM_MODE": "fast", "MM_ROOT": None}


# G2's data check, as the probes report an image the runtime's Pillow cannot decode (the data path opened it)
DECODE = (f"data pipeline failed: OSError: decoder zip not available (raised in /opt/rt/lib/python3.11/site-packages/"
          f"PIL/ImageFile.py:300 in load; called from {MM_PLUGIN}:72 in _regularize_images)")


def test_the_sources_own_error_on_records_that_decode_outside_the_runtime_is_the_runtimes_library():
    verdict = runtime_decode_owner(DECODE, "OSError: decoder zip not available", [], 2)
    assert (verdict.owner, verdict.rule) == ("environment", "runtime-decode") and "Pillow" in verdict.reason


def test_a_file_that_does_not_decode_outside_the_runtime_either_or_another_error_decides_nothing():
    # the file itself is broken: the records' (data), as the message's case says
    assert runtime_decode_owner(DECODE, "OSError: decoder zip not available", ["sample_00.png: OSError: x"], 2) is None
    # the source's processor met no error, or another one: the run's data path may be the cause
    assert runtime_decode_owner(DECODE, "", [], 2) is None
    assert runtime_decode_owner(DECODE, "ValueError: image size 0", [], 2) is None
    assert runtime_decode_owner(DECODE, "OSError: decoder zip not available", None, 0) is None


# G4's training launch, as recorded: a library's deprecation warning raised in a rank (the filter set to error)
WARNED = ('[rank0]:   File "/opt/rt/lib/python3.11/site-packages/transformers/utils/deprecation.py", line 176, in '
          "wrapped_func\n[rank0]:     warnings.warn(message, FutureWarning, stacklevel=2)\n[rank0]: FutureWarning: "
          "Both `past_key_values` and `cache` are set for `FSDPQwen2VLDecoderLayer.forward`.\n"
          "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n")


def test_a_warning_raised_as_an_error_is_the_filter_the_runtimes_environment_or_the_launch_script_sets():
    verdict = warning_raised_owner(WARNED, artifacts(interpreter_env={"PYTHONWARNINGS": "error"}))
    assert (verdict.owner, verdict.rule) == ("environment", "runtime-env") and "PYTHONWARNINGS" in verdict.reason
    verdict = warning_raised_owner(WARNED, artifacts(), script="torchrun $DISTRIBUTED_ARGS -W error trainer.py\n")
    assert verdict.owner == "config" and "-W error" in verdict.reason
    # neither sets the filter: undecided; a warning only printed (the run went on) is no raised warning
    assert warning_raised_owner(WARNED, artifacts(interpreter_env={"PYTHONWARNINGS": "ignore"})) is None
    printed = "/opt/rt/x.py:12: FutureWarning: Both are set\n  warnings.warn(msg)\nRuntimeError: boom\n"
    assert warning_raised_owner(printed, artifacts(interpreter_env={"PYTHONWARNINGS": "error"})) is None


# G4's training launch, as recorded: gloo refusing the device its transport variable asked for
GLOO = ('  File "/opt/rt/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2169, in '
        "_new_process_group_helper\n    backend_class = ProcessGroupGloo(\n"
        "RuntimeError: makeDeviceForHostname(): unsupported gloo device\n")


def test_a_backend_failing_to_start_under_its_own_variables_from_the_runtime_is_environment():
    verdict = backend_env_owner(GLOO, artifacts(environment={"GLOO_DEVICE_TRANSPORT": "UV", "NCCL_DEBUG": "INFO"}))
    assert verdict.owner == "environment" and "GLOO_DEVICE_TRANSPORT=UV" in verdict.reason
    assert "NCCL_DEBUG" not in verdict.reason
    # no gloo variable set by the runtime, or the run's own script sets it: not decided here
    assert backend_env_owner(GLOO, artifacts(environment={"NCCL_DEBUG": "INFO"})) is None
    assert backend_env_owner(GLOO, artifacts(environment={"GLOO_DEVICE_TRANSPORT": "UV"}),
                             script_sets=["GLOO_DEVICE_TRANSPORT"]) is None
