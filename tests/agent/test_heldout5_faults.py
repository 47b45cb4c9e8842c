"""The fifth held-out fault group (msmigrate/testbeds/faults/heldout5.py) is well formed, selectable on its own and
applies: every edit fault's anchors are in a green rules migration of qwen2_vl on the stand-in (built once here) and
change the files they name, leaving Python that compiles, YAML that parses and shell that bash parses; the faults in
the data path and the plugin change what the data path or the model computes on the same records (or make it fail);
every runtime fault's simulation, run in a wrapped interpreter, produces the condition it stands for, and the same
program without it gets past that point. Nothing here runs the gates on a faulted copy or classifies anything: that
measurement is the routing benchmark's (``--group heldout5``)."""

from __future__ import annotations

import signal

import pytest
from heldout_checks import (assert_bench_reports_every_group, assert_computes_otherwise, assert_group_apart,
                            computed_on_green, run_wrapped_and_plain)
from standin_migration import apply_fault_checked, fault_copy, green_for_faults

from msmigrate.testbeds.faults import apply, heldout5

H5 = {f.id: f for f in heldout5.FAULTS}
EDITS = sorted(i for i, f in H5.items() if f.edits)
RUNTIMES = sorted(i for i, f in H5.items() if f.runtime is not None)
# a text read (universal newlines) cannot see a carriage return: this one is checked on the bytes
_CRLF = "h5-config-launch-crlf"


def test_the_group_is_registered_apart_blind_and_spread_over_owners_and_surfaces():
    assert_group_apart("heldout5", H5, "h5-", 24, {"model": 6, "data": 6, "config": 7, "environment": 5})
    assert sum(f.surface == "launch" for f in H5.values()) >= 2


def test_the_bench_reports_the_group_apart():
    assert_bench_reports_every_group()


@pytest.fixture(scope="module")
def green(tmp_path_factory):
    """The green migration's target at the run's commit, its source, and where its files are."""
    return green_for_faults(tmp_path_factory.mktemp("h5_green"))


@pytest.mark.integration
@pytest.mark.parametrize("fault_id", EDITS)
def test_each_edit_fault_applies_to_the_green_migration_and_changes_its_file(green, tmp_path, fault_id):
    layout = fault_copy(green, tmp_path)
    if fault_id != _CRLF:
        apply_fault_checked(H5[fault_id], layout)
        return
    script = layout.path("{launch}")
    before = script.read_bytes()
    apply(H5[fault_id], layout)
    after = script.read_bytes()
    assert b"\r" not in before and after == before.replace(b"\n", b"\r\n")


_DATA_PATH = {"template", "mm_plugin"}
# (the collator's change is in the token types only the model reads; the YAML switch changes the tokenisation)
COMPUTED = sorted(i for i, f in H5.items()
                  if f.surface in _DATA_PATH | {"plugin", "collator"} or i == "h5-config-split-special-tokens")


@pytest.fixture(scope="module")
def green_computed(green, tmp_path_factory):
    return computed_on_green(green, tmp_path_factory.mktemp("h5_green_computed"))


@pytest.mark.integration
@pytest.mark.parametrize("fault_id", COMPUTED)
def test_each_data_path_and_plugin_fault_changes_what_is_computed_or_fails(green, green_computed, tmp_path,
                                                                          fault_id):
    fault = H5[fault_id]
    layout = fault_copy(green, tmp_path)
    apply_fault_checked(fault, layout)
    assert_computes_otherwise(layout, green, green_computed,
                              "model" if fault.surface in ("plugin", "collator") else "data", tmp_path)


# Per runtime fault: the program and what it prints under the wrapped interpreter (None: it is killed by a signal)
SIMULATED = {
    "h5-env-pythonoptimize-2": ("import transformers.models.qwen2_vl.modeling_qwen2_vl\n", "docstring"),
    "h5-env-pydantic-v1": ("from pydantic import BaseModel, ConfigDict\n", "cannot import name 'ConfigDict'"),
    "h5-env-torch-without-accelerator": (
        "import torch\ntorch.accelerator.device_count()\n", "has no attribute 'accelerator'"),
    "h5-env-weights-lfs-pointers": (
        "import torch\nfrom safetensors.torch import load_file, save_file\n"
        "save_file({'w': torch.zeros(2)}, 'model.safetensors')\nload_file('model.safetensors')\n",
        "HeaderTooLarge"),
    "h5-env-illegal-instruction": ("import torch\n", None),
}


def test_every_runtime_fault_has_a_check():
    assert set(SIMULATED) == set(RUNTIMES)


@pytest.mark.integration
@pytest.mark.parametrize("fault_id", RUNTIMES)
def test_each_runtime_fault_produces_its_condition_in_the_wrapped_runtime(tmp_path, fault_id):
    program, expect = SIMULATED[fault_id]
    out, plain = run_wrapped_and_plain(H5[fault_id].runtime, program, {}, tmp_path)
    if expect is None:
        assert out.returncode == -signal.SIGILL, (out.returncode, out.stderr[-2000:])
    else:
        assert out.returncode != 0 and expect in out.stderr, out.stderr[-2000:]
    # without the fault the same program gets past the point the fault breaks (the simulation is the cause)
    assert plain.returncode == 0, plain.stderr[-2000:]
