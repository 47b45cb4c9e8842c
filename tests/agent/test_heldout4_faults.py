"""The fourth held-out fault group (msmigrate/testbeds/faults/heldout4.py) is well formed, selectable on its own and
applies: every edit fault's anchors are in a green rules migration of qwen2_vl on the stand-in (built once here) and
change the files they name, leaving Python that compiles and YAML that parses; the faults in the data path and the
plugin change what the data path or the model computes on the same records (or make it fail); every runtime fault's
simulation, run in a wrapped interpreter, produces the condition it stands for, and the same program without it gets
past that point. Nothing here runs the gates on a faulted copy or classifies anything: that measurement is the
routing benchmark's (``--group heldout4``), made by someone other than the faults' author."""

from __future__ import annotations

import subprocess
import sys

import pytest
from heldout_checks import (assert_bench_reports_every_group, assert_computes_otherwise, assert_group_apart,
                            computed_on_green, run_wrapped_and_plain)
from standin_migration import apply_fault_checked, fault_copy, green_for_faults

from msmigrate.testbeds.faults import heldout4, wrap_runtime

H4 = {f.id: f for f in heldout4.FAULTS}
EDITS = sorted(i for i, f in H4.items() if f.edits)
RUNTIMES = sorted(i for i, f in H4.items() if f.runtime is not None)


def test_the_group_is_registered_apart_blind_and_spread_over_owners_and_surfaces():
    assert_group_apart("heldout4", H4, "h4-", 30, {"model": 8, "data": 8, "config": 9, "environment": 5})
    assert sum(f.surface == "launch" for f in H4.values()) >= 2


def test_the_bench_reports_the_group_apart():
    assert_bench_reports_every_group()


@pytest.fixture(scope="module")
def green(tmp_path_factory):
    """The green migration's target at the run's commit, its source, and where its files are."""
    return green_for_faults(tmp_path_factory.mktemp("h4_green"))


@pytest.mark.integration
@pytest.mark.parametrize("fault_id", EDITS)
def test_each_edit_fault_applies_to_the_green_migration_and_changes_its_file(green, tmp_path, fault_id):
    apply_fault_checked(H4[fault_id], fault_copy(green, tmp_path))


_DATA_PATH = {"template", "mm_plugin", "collator"}
# (the one YAML fault here changes what the data path reads; the others act in the trainer)
COMPUTED = sorted(i for i, f in H4.items()
                  if f.surface in _DATA_PATH | {"plugin"} or i == "h4-config-attr-images-singular")


@pytest.fixture(scope="module")
def green_computed(green, tmp_path_factory):
    return computed_on_green(green, tmp_path_factory.mktemp("h4_green_computed"))


@pytest.mark.integration
@pytest.mark.parametrize("fault_id", COMPUTED)
def test_each_data_path_and_plugin_fault_changes_what_is_computed_or_fails(green, green_computed, tmp_path,
                                                                          fault_id):
    fault = H4[fault_id]
    layout = fault_copy(green, tmp_path)
    apply_fault_checked(fault, layout)
    assert_computes_otherwise(layout, green, green_computed, "model" if fault.surface == "plugin" else "data",
                              tmp_path)


# Per runtime fault: the variables the program runs with, the program, and what it prints under the wrapped
# interpreter
SIMULATED = {
    "h4-env-pythonwarnings-error": (
        # (plain, the warning is printed, not raised)
        {}, "import warnings\nwarnings.warn('an advisory warning')\n", "Traceback (most recent call last)"),
    "h4-env-pyyaml-uninstalled": ({}, "import yaml\n", "import of yaml halted"),
    "h4-env-localhost-unresolved": (
        {}, "import torch.distributed as d\nd.TCPStore('localhost', 0, 1, True)\n", "Name or service not known"),
    "h4-env-default-dtype-float64": (
        {}, "import torch\nassert torch.ones(1).dtype == torch.float32, f'built as {torch.ones(1).dtype}'\n",
        "built as torch.float64"),
    "h4-env-gloo-transport-uv": (
        {}, "import os, tempfile, torch.distributed as d\n"
            "d.init_process_group('gloo', rank=0, world_size=1, "
            "init_method='file://' + os.path.join(tempfile.mkdtemp(), 'store'))\n",
        "unsupported gloo device"),
}


def test_every_runtime_fault_has_a_check():
    assert set(SIMULATED) == set(RUNTIMES)


def test_the_unresolved_localhost_reaches_the_name_the_rendezvous_module_bound(tmp_path):
    """torch.distributed.rendezvous binds TCPStore while torch.distributed is imported, before the patch runs: the
    simulation rebinds it there too, or a store made through that module would not see the condition."""
    program = ("import sys, torch.distributed as d\nr = sys.modules['torch.distributed.rendezvous']\n"
               "print('same' if getattr(r, 'TCPStore', d.TCPStore) is d.TCPStore else 'stale')\n")
    python = wrap_runtime(H4["h4-env-localhost-unresolved"].runtime, sys.executable, tmp_path / "rt")
    out = subprocess.run([python, "-c", program], capture_output=True, text=True, timeout=180)
    assert out.stdout.strip() == "same", out.stderr[-2000:]


@pytest.mark.integration
@pytest.mark.parametrize("fault_id", RUNTIMES)
def test_each_runtime_fault_produces_its_condition_in_the_wrapped_runtime(tmp_path, fault_id):
    env, program, expect = SIMULATED[fault_id]
    out, plain = run_wrapped_and_plain(H4[fault_id].runtime, program, env, tmp_path)
    assert out.returncode != 0 and expect in out.stderr, out.stderr[-2000:]
    # without the fault the same program gets past the point the fault breaks (the simulation is the cause)
    assert plain.returncode == 0 and expect not in plain.stderr, plain.stderr[-2000:]
