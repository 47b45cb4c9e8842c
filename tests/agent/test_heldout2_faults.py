"""The second held-out fault group (msmigrate/testbeds/faults/heldout2.py) is well formed and applies: every edit
fault's anchors are in a green rules migration of qwen2_vl on the stand-in (built once here) and change the files
they name, leaving Python that compiles and YAML that parses; every runtime fault's simulation, run in a wrapped
interpreter, produces the condition it stands for. Nothing here runs the gates on a faulted copy or classifies
anything: that measurement is the routing benchmark's, made by someone other than the faults' author."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest
from standin_migration import apply_fault_checked, fault_copy, green_for_faults

from msmigrate.testbeds.faults import all_faults, heldout2, wrap_runtime

pytestmark = pytest.mark.integration

H2 = {f.id: f for f in heldout2.FAULTS}
EDITS = sorted(i for i, f in H2.items() if f.edits)
RUNTIMES = sorted(i for i, f in H2.items() if f.runtime is not None)
ARTIFACT_SURFACES = {"plugin", "mm_plugin", "template", "collator", "yaml", "launch"}


def test_the_group_is_registered_blind_and_spread_over_owners_and_surfaces():
    registered = {f.id for f in all_faults()}
    assert set(H2) <= registered
    assert all(i.startswith("h2-") and f.heldout for i, f in H2.items())
    per_owner = Counter(f.owner for f in H2.values())
    assert len(H2) >= 24 and per_owner["model"] >= 6 and per_owner["data"] >= 6 and per_owner["config"] >= 6 \
        and per_owner["environment"] >= 5, per_owner
    assert {f.surface for f in H2.values()} >= ARTIFACT_SURFACES | {"dataset", "runtime", "host"}
    # repair is expected exactly where the fix is in the run's own artifacts; never on the user's records or host
    assert all(f.repair == (f.surface in ARTIFACT_SURFACES) for f in H2.values())
    assert all((f.runtime is not None) == (f.owner == "environment") for f in H2.values())
    # no fault repeats another group's edits
    others = {tuple(f.edits) for f in all_faults() if f.id not in H2 and f.edits}
    assert not [i for i in EDITS if tuple(H2[i].edits) in others]


@pytest.fixture(scope="module")
def green(tmp_path_factory):
    """The green migration's target at the run's commit, its source, and where its files are."""
    return green_for_faults(tmp_path_factory.mktemp("h2_green"))


@pytest.mark.parametrize("fault_id", EDITS)
def test_each_edit_fault_applies_to_the_green_migration_and_changes_its_file(green, tmp_path, fault_id):
    fault = H2[fault_id]
    layout = fault_copy(green, tmp_path)
    apply_fault_checked(fault, layout, json_kept=fault_id != "h2-data-records-concatenated")
    if fault_id == "h2-data-records-concatenated":  # one object per sample, no enclosing list
        with pytest.raises(json.JSONDecodeError, match="Extra data"):
            json.loads(layout.data.read_text())
        first = json.JSONDecoder().raw_decode(layout.data.read_text())[0]
        assert isinstance(first, dict) and first["messages"][0]["role"] == "user"


# Per runtime fault: a short program and what it prints (or the signal it dies by) under the wrapped interpreter,
# as the trainer's rank (RANK set) or any other process of that runtime
RANK0 = {"RANK": "0", "MASTER_PORT": "6000"}
_INIT = ("import torch.distributed as d\n"
         "d.init_process_group('gloo', init_method='tcp://127.0.0.1:1', rank=0, world_size=1)\n")
SIMULATED = {
    "h2-env-master-port-in-use": (RANK0, _INIT, "EADDRINUSE"),
    "h2-env-torch-without-gloo": ({}, "import torch.distributed as d\nassert not d.is_gloo_available()\n" + _INIT,
                                  "doesn't have Gloo built in"),
    "h2-env-torch-before-fsdp2": ({}, "import torch\nfrom torch.distributed.fsdp import fully_shard\n",
                                  "cannot import name 'fully_shard'"),
    "h2-env-accelerate-missing": ({}, "from transformers.utils import is_accelerate_available\n"
                                      "assert not is_accelerate_available()\nfrom accelerate import init_empty_weights\n",
                                  "ModuleNotFoundError"),
    "h2-env-host-memory-held": ({}, "import torch\ntorch.nn.Embedding(8, 4)\n", "not enough memory"),
    "h2-env-preempted-sigterm": (RANK0, "import torch\nx = torch.ones(2, requires_grad=True)\n"
                                        "for _ in range(3):\n    (x * 2).sum().backward()\nprint('survived')\n",
                                 -15),
}


def test_every_runtime_fault_has_a_check():
    assert set(SIMULATED) == set(RUNTIMES)


@pytest.mark.parametrize("fault_id", RUNTIMES)
def test_each_runtime_fault_produces_its_condition_in_the_wrapped_runtime(tmp_path, fault_id):
    env, program, expect = SIMULATED[fault_id]
    python = wrap_runtime(H2[fault_id].runtime, sys.executable, tmp_path / "rt", model_type="qwen2_vl")
    out = subprocess.run([python, "-c", program], capture_output=True, text=True, timeout=180,
                         env={**os.environ, **env})
    if isinstance(expect, int):
        assert out.returncode == expect and "survived" not in out.stdout, (out.returncode, out.stderr[-2000:])
    else:
        assert out.returncode != 0 and expect in out.stderr, out.stderr[-2000:]
    # without the fault the same program gets past the point the fault breaks (the simulation is the cause)
    if fault_id in ("h2-env-torch-before-fsdp2", "h2-env-host-memory-held", "h2-env-preempted-sigterm"):
        plain = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=180,
                               env={**os.environ, **env})
        assert plain.returncode == 0, plain.stderr[-2000:]
