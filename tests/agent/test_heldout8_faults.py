"""The eighth held-out fault group (msmigrate/testbeds/faults/heldout8.py) is well formed, selectable on its own and
applies: every edit fault's anchors are in a green rules migration of qwen2_vl on the stand-in (built once here) and
change the files they name, leaving Python that compiles, YAML that parses and shell that bash parses; the faults in
the data path and the plugin change what the data path or the model computes on the same records (or make it fail);
every runtime fault's simulation, run in a wrapped interpreter, produces the condition it stands for, and the same
program without it gets past that point. Nothing here runs the gates on a faulted copy or classifies anything: that
measurement is the routing benchmark's (``--group heldout8``), made by someone other than the faults' author."""

from __future__ import annotations

import signal
import socket

import pytest
from heldout_checks import (assert_bench_reports_every_group, assert_computes_otherwise, assert_group_apart,
                            computed_on_green, run_wrapped_and_plain)
from standin_migration import apply_fault_checked, fault_copy, green_for_faults

from msmigrate.testbeds.faults import heldout8

H8 = {f.id: f for f in heldout8.FAULTS}
EDITS = sorted(i for i, f in H8.items() if f.edits)
RUNTIMES = sorted(i for i, f in H8.items() if f.runtime is not None)


def test_the_group_is_registered_apart_blind_and_spread_over_owners_and_surfaces():
    assert_group_apart("heldout8", H8, "h8-", 24, {"model": 6, "data": 6, "config": 7, "environment": 5})
    assert sum(f.surface == "launch" for f in H8.values()) >= 2


def test_the_bench_reports_the_group_apart():
    assert_bench_reports_every_group()


@pytest.fixture(scope="module")
def green(tmp_path_factory):
    """The green migration's target at the run's commit, its source, and where its files are."""
    return green_for_faults(tmp_path_factory.mktemp("h8_green"))


@pytest.mark.integration
@pytest.mark.parametrize("fault_id", EDITS)
def test_each_edit_fault_applies_to_the_green_migration_and_changes_its_file(green, tmp_path, fault_id):
    layout = fault_copy(green, tmp_path)
    apply_fault_checked(H8[fault_id], layout)


_DATA_PATH = {"template", "mm_plugin"}
COMPUTED = sorted(i for i, f in H8.items() if f.surface in _DATA_PATH | {"plugin", "collator"})


@pytest.fixture(scope="module")
def green_computed(green, tmp_path_factory):
    return computed_on_green(green, tmp_path_factory.mktemp("h8_green_computed"))


@pytest.mark.integration
@pytest.mark.parametrize("fault_id", COMPUTED)
def test_each_data_path_and_plugin_fault_changes_what_is_computed_or_fails(green, green_computed, tmp_path,
                                                                          fault_id):
    fault = H8[fault_id]
    layout = fault_copy(green, tmp_path)
    apply_fault_checked(fault, layout)
    assert_computes_otherwise(layout, green, green_computed,
                              "model" if fault.surface in ("plugin", "collator") else "data", tmp_path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Per runtime fault: the variables, the program and what it prints under the wrapped interpreter (a signal: the
# process is killed by it, with that text on stderr); "{source}" is the green migration's checkpoint folder
SIMULATED = {
    "h8-env-python-built-without-ctypes": ({}, "import torch\n", "No module named '_ctypes'"),
    "h8-env-address-space-ulimit": ({}, "import torch\n", "failed to map segment from shared object"),
    "h8-env-weights-rewritten-while-mapped": (
        {}, "from safetensors import safe_open\n"
            "with safe_open({source!r} + '/model.safetensors', framework='pt') as f:\n"
            "    f.get_tensor(next(iter(f.keys())))\n",
        (signal.SIGBUS, "Bus error")),
    # (no thread cap in the environment, as on the host the fault stands for)
    "h8-env-openblas-too-many-regions": (
        {"OPENBLAS_NUM_THREADS": "", "OMP_NUM_THREADS": ""}, "import numpy\nnumpy.ones((4, 4)) @ numpy.ones((4, 4))\n",
        (signal.SIGSEGV, "too many memory regions")),
    "h8-env-dataset-on-object-store-mount": (
        {}, "from PIL import Image\n"
            "Image.open({source!r} + '/data/images/sample_00.png').load()\n",
        "Connection timed out"),
}


def test_every_runtime_fault_has_a_check():
    assert set(SIMULATED) == set(RUNTIMES)


@pytest.mark.integration
@pytest.mark.parametrize("fault_id", RUNTIMES)
def test_each_runtime_fault_produces_its_condition_in_the_wrapped_runtime(green, tmp_path, fault_id):
    env, program, expect = SIMULATED[fault_id]
    env = {k: v.format(port=_free_port()) for k, v in env.items()}
    program = program.replace("{source!r}", repr(str(green["source"])))
    out, plain = run_wrapped_and_plain(H8[fault_id].runtime, program, env, tmp_path)
    if isinstance(expect, tuple):
        killed_by, text = expect
        assert out.returncode == -killed_by and text in out.stderr, (out.returncode, out.stderr[-2000:])
    else:
        assert out.returncode != 0 and expect in out.stderr, out.stderr[-2000:]
    # without the fault the same program gets past the point the fault breaks (the simulation is the cause)
    assert plain.returncode == 0, plain.stderr[-2000:]
