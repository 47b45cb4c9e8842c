"""G3's rendezvous-host check: the delivered script's MASTER_ADDR resolved and connected to in the runtime, as the
user's torchrun does (every gate launch uses 127.0.0.1 and never meets the script's name). The probe runs here for
real in this interpreter; a site hook that makes ``localhost`` unresolvable stands for a runtime whose /etc/hosts
lacks the line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import msmigrate
from msmigrate.agent.launch_script_checks import rendezvous_findings, rendezvous_host
from msmigrate.knowledge.classifier import classify

PROBE = Path(msmigrate.__file__).parent / "tools" / "probes" / "rendezvous_host.py"
SCRIPT = """#!/bin/bash
MASTER_ADDR={addr}
MASTER_PORT=${{MASTER_PORT:-6000}}
NNODES={nodes}
DISTRIBUTED_ARGS="--nproc_per_node 2 --nnodes $NNODES --master_addr $MASTER_ADDR --master_port $MASTER_PORT"
torchrun $DISTRIBUTED_ARGS mindspeed_mm/fsdp/train/trainer.py cfg.yaml
"""
# a resolver without the localhost line: every lookup of the name fails as glibc's does (EAI_NONAME)
UNRESOLVED_LOCALHOST = """import socket
class _NoLocalhost:
    def __init__(self, lookup):
        self.lookup = lookup
    def __call__(self, host, *rest, **kw):
        if (host.decode() if isinstance(host, bytes) else host) == "localhost":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.lookup(host, *rest, **kw)
socket.getaddrinfo = _NoLocalhost(socket.getaddrinfo)
"""


@pytest.mark.parametrize("addr,nodes,host", [
    ("localhost", 1, "localhost"), ("${MASTER_ADDR:-localhost}", 1, "localhost"), ('"trainer-host"', 1, "trainer-host"),
    ("127.0.0.1", 1, None), ("$(hostname -i)", 1, None), ("node-0", 2, None), ("10.1.2.3", 1, "10.1.2.3")])
def test_the_host_a_single_node_script_names(addr, nodes, host):
    assert rendezvous_host(SCRIPT.format(addr=addr, nodes=nodes)) == host
    assert rendezvous_host("torchrun --master-addr=node-3 t.py\n") == "node-3"


def _probe(tmp_path, hook: str | None):
    def run(host):
        env = dict(os.environ)
        if hook is not None:
            (tmp_path / "sitecustomize.py").write_text(hook)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH")) if p)
        out = subprocess.run([sys.executable, str(PROBE), "--host", host], capture_output=True, text=True,
                             timeout=120, env=env)
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("MSMIGRATE_PROBE_RESULT ")][-1]
        return json.loads(line.split(" ", 1)[1])
    return run


def test_a_resolving_localhost_is_no_finding(tmp_path):
    assert rendezvous_findings(SCRIPT.format(addr="localhost", nodes=1), "l.sh", _probe(tmp_path, None)) == []


def test_localhost_unresolved_in_the_runtime_is_the_environments(tmp_path):
    found = rendezvous_findings(SCRIPT.format(addr="localhost", nodes=1), "l.sh", _probe(tmp_path, UNRESOLVED_LOCALHOST))
    assert [(f["code"], f["value"]) for f in found] == [("rendezvous-host-unresolved", "localhost")]
    assert "/etc/hosts" in found[0]["message"] and "Name or service not known" in found[0]["message"]
    line = f"[{found[0]['code']}] {found[0]['key']}: {found[0]['message']}"
    assert classify(line, [found[0]["code"]], gate_verdict=[line]).owner == "environment"


def test_a_foreign_name_that_does_not_resolve_is_the_scripts(tmp_path):
    found = rendezvous_findings(SCRIPT.format(addr="no-such-host.invalid", nodes=1), "l.sh", _probe(tmp_path, None))
    assert [f["code"] for f in found] == ["launch-rendezvous-host"]
    line = f"[{found[0]['code']}] {found[0]['key']}: {found[0]['message']}"
    assert classify(line, [found[0]["code"]], gate_verdict=[line]).owner == "config"


def test_no_probe_result_concludes_nothing():
    assert rendezvous_findings(SCRIPT.format(addr="localhost", nodes=1), "l.sh", lambda host: None) == []


def test_another_clusters_address_in_a_one_node_script_is_the_scripts(tmp_path):
    """192.0.2.17 (a documentation address, routed nowhere) stands for node-0 of the cluster the script came from."""
    found = rendezvous_findings(SCRIPT.format(addr="192.0.2.17", nodes=1), "l.sh", _probe(tmp_path, None))
    assert [(f["code"], f["value"]) for f in found] == [("launch-rendezvous-host", "192.0.2.17")]
    line = f"[{found[0]['code']}] {found[0]['key']}: {found[0]['message']}"
    assert classify(line, [found[0]["code"]], gate_verdict=[line]).owner == "config"


ETCD = ("torchrun --nproc_per_node 2 --nnodes 1 --rdzv_backend etcd --rdzv_endpoint {endpoint} --rdzv_id sft "
        "mindspeed_mm/fsdp/train/trainer.py cfg.yaml\n")


@pytest.mark.parametrize("endpoint,host", [("etcd-0.cluster.invalid:2379", "etcd-0.cluster.invalid"),
                                           ("[fd00::5]:2379", "fd00::5"), ("10.1.2.3", "10.1.2.3"),
                                           ("127.0.0.1:29400", None), ("$ETCD_ENDPOINT", None)])
def test_a_rendezvous_endpoint_is_where_torchrun_meets(endpoint, host):
    script = SCRIPT.format(addr="127.0.0.1", nodes=1) + ETCD.format(endpoint=endpoint)
    assert rendezvous_host(script) == host


def test_an_endpoint_this_host_cannot_reach_is_the_scripts_and_names_the_backend(tmp_path):
    """An elastic-training how-to's etcd endpoint in a one-node script: the probe resolves it in the runtime."""
    script = SCRIPT.format(addr="127.0.0.1", nodes=1) + ETCD.format(endpoint="etcd-0.cluster.invalid:2379")
    found = rendezvous_findings(script, "l.sh", _probe(tmp_path, None))
    assert [(f["code"], f["key"], f["value"]) for f in found] == \
        [("launch-rendezvous-host", "--rdzv_endpoint", "etcd-0.cluster.invalid:2379")]
    assert "--rdzv_backend etcd" in found[0]["message"] and "does not resolve" in found[0]["message"]
    line = f"[{found[0]['code']}] {found[0]['key']}: {found[0]['message']}"
    assert classify(line, [found[0]["code"]], gate_verdict=[line]).owner == "config"
