"""Two heldout4 environment faults that passed every gate (issue 37, seventh session), each in its real wrapped
runtime (faults/heldout4.py's start-up hook), caught by G3's own functions on what the probes read there: torch's
default dtype set to float64 at start-up, and ``localhost`` not resolving. Nothing here names a fault's message."""

from __future__ import annotations

import sys

from msmigrate.agent.launch_script_checks import rendezvous_findings
from msmigrate.agent.routes.fsdp2.gates.source_settings import default_dtype_findings
from msmigrate.testbeds.faults import all_faults, wrap_runtime
from msmigrate.tools.runtime import run_probe

FAULTS = {f.id: f for f in all_faults()}
CFG = {"parallel": {"fsdp_plan": {"param_dtype": "fp32", "reduce_dtype": "fp32"}}}
SCRIPT = """#!/bin/bash
NPUS_PER_NODE=2
MASTER_ADDR=localhost
MASTER_PORT=6000
NNODES=1
torchrun --nproc_per_node $NPUS_PER_NODE --nnodes $NNODES --master_addr $MASTER_ADDR --master_port $MASTER_PORT \\
    mindspeed_mm/fsdp/train/trainer.py cfg.yaml
"""


def _rendezvous(python):
    def probe(host):
        res = run_probe(python, "rendezvous_host", ["--host", host], timeout=120)
        assert res.ok, res.error
        return res.data["result"]
    return probe


def test_g3_reads_the_default_dtype_a_start_up_hook_sets(tmp_path):
    fault = FAULTS["h4-env-default-dtype-float64"]
    clean = run_probe(sys.executable, "env_probe", [], timeout=120)
    assert clean.ok and default_dtype_findings(CFG, clean.data["result"], "cfg.yaml") == []
    python = wrap_runtime(fault.runtime, sys.executable, tmp_path / "rt")
    res = run_probe(python, "env_probe", ["--runtime-python", python], timeout=120)
    assert res.ok, res.error
    found = default_dtype_findings(CFG, res.data["result"], "cfg.yaml")
    assert [f["code"] for f in found] == ["runtime-default-dtype"]
    assert any(w in found[0]["message"] for w in fault.fix)


def test_g3_resolves_the_scripts_rendezvous_host_in_the_runtime(tmp_path):
    fault = FAULTS["h4-env-localhost-unresolved"]
    assert rendezvous_findings(SCRIPT, "l.sh", _rendezvous(sys.executable)) == []
    python = wrap_runtime(fault.runtime, sys.executable, tmp_path / "rt")
    found = rendezvous_findings(SCRIPT, "l.sh", _rendezvous(python))
    assert [f["code"] for f in found] == ["rendezvous-host-unresolved"]
    assert any(w in found[0]["message"] for w in fault.fix)
