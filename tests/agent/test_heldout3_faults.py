"""The third held-out fault group (msmigrate/testbeds/faults/heldout3.py) is well formed, selectable on its own and
applies: every edit fault's anchors are in a green rules migration of qwen2_vl on the stand-in (built once here) and
change the files they name, leaving Python that compiles and YAML that parses; every runtime fault's simulation, run
in a wrapped interpreter, produces the condition it stands for, and the same program without it gets past that
point. Nothing here runs the gates on a faulted copy or classifies anything: that measurement is the routing
benchmark's (``--group heldout3``), made by someone other than the faults' author."""

from __future__ import annotations

import json

import pytest
from heldout_checks import assert_bench_reports_every_group, assert_group_apart, run_wrapped_and_plain
from standin_migration import apply_fault_checked, fault_copy, green_for_faults

from msmigrate.testbeds.faults import heldout3

H3 = {f.id: f for f in heldout3.FAULTS}
EDITS = sorted(i for i, f in H3.items() if f.edits)
RUNTIMES = sorted(i for i, f in H3.items() if f.runtime is not None)


def test_the_group_is_registered_apart_blind_and_spread_over_owners_and_surfaces():
    assert_group_apart("heldout3", H3, "h3-", 32, {"model": 8, "data": 8, "config": 9, "environment": 7})


def test_the_bench_reports_the_group_apart():
    assert_bench_reports_every_group()


@pytest.fixture(scope="module")
def green(tmp_path_factory):
    """The green migration's target at the run's commit, its source, and where its files are."""
    return green_for_faults(tmp_path_factory.mktemp("h3_green"))


@pytest.mark.integration
@pytest.mark.parametrize("fault_id", EDITS)
def test_each_edit_fault_applies_to_the_green_migration_and_changes_its_file(green, tmp_path, fault_id):
    fault = H3[fault_id]
    layout = fault_copy(green, tmp_path)
    before = apply_fault_checked(fault, layout, json_kept=fault_id != "h3-data-records-utf8-bom")
    if fault_id == "h3-data-records-utf8-bom":  # the reader the dataset uses refuses it; the same records without
        with pytest.raises(json.JSONDecodeError, match="BOM"):  # the mark are the green ones
            json.loads(layout.data.read_text(encoding="utf-8"))
        assert json.loads(layout.data.read_text(encoding="utf-8-sig")) == json.loads(before[layout.data])


# Per runtime fault: the variables the program runs with (RANK as a trainer rank; PYTHONPATH the green target, with
# the launch script's route switch, when it imports the target's code), the program, and what it prints under the
# wrapped interpreter
_TARGET = "@TARGET@"
_RANK1 = {"RANK": "1"}
_IN_TARGET = {"PYTHONPATH": _TARGET, "NON_MEGATRON": "true"}  # the FSDP2 route of the target
SIMULATED = {
    "h3-env-image-placeholder-exported": (
        _IN_TARGET,
        "from mindspeed_mm.fsdp.data.data_utils.func_utils.mm_plugin import BasePlugin\n"
        "BasePlugin._validate_messages([{'role': 'user', 'content': '<image>Describe.'}], ['a.png'], [], [])\n",
        "does not match the number of <img> tokens"),
    "h3-env-mindspeed-without-fsdp": (
        _IN_TARGET, "import mindspeed\nfrom mindspeed.fsdp.utils.log import print_rank\n",
        "No module named 'mindspeed.fsdp'"),
    "h3-env-transformers-install-truncated": (
        {}, "from transformers import Qwen2VLForConditionalGeneration\nQwen2VLForConditionalGeneration.__name__\n",
        "was never closed"),
    "h3-env-huggingface-hub-pinned-old": ({}, "import transformers\n", "found huggingface-hub==0.20.3"),
    "h3-env-collective-timeout": (
        _RANK1, "import torch, torch.distributed as d\nd.all_reduce(torch.ones(1))\n", "Timed out waiting"),
    "h3-env-weights-stale-nfs-handle": (
        {}, "import os, tempfile, torch\nfrom safetensors.torch import load_file, save_file\n"
            "p = os.path.join(tempfile.mkdtemp(), 'w.safetensors')\nsave_file({'w': torch.ones(2)}, p)\n"
            "load_file(p)\n", "Stale file handle"),
    "h3-env-pillow-without-zlib": (
        {}, "import os, tempfile\nfrom PIL import Image\np = os.path.join(tempfile.mkdtemp(), 'i.png')\n"
            "Image.new('RGB', (8, 8), (9, 9, 9)).save(p)\nImage.open(p).load()\n", "decoder zip not available"),
}


def test_every_runtime_fault_has_a_check():
    assert set(SIMULATED) == set(RUNTIMES)


@pytest.mark.integration
@pytest.mark.parametrize("fault_id", RUNTIMES)
def test_each_runtime_fault_produces_its_condition_in_the_wrapped_runtime(green, tmp_path, fault_id):
    env, program, expect = SIMULATED[fault_id]
    env = {k: v.replace(_TARGET, str(green["target"])) for k, v in env.items()}
    out, plain = run_wrapped_and_plain(H3[fault_id].runtime, program, env, tmp_path)
    assert out.returncode != 0 and expect in out.stderr, out.stderr[-2000:]
    # without the fault the same program gets past the point the fault breaks (the simulation is the cause)
    assert expect not in plain.stderr, plain.stderr[-2000:]
    if fault_id != "h3-env-collective-timeout":  # (plain, the collective fails for want of a process group)
        assert plain.returncode == 0, plain.stderr[-2000:]
