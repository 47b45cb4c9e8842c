"""How many processes per node and how many nodes the delivered launch script asks for: the user's, never the
similar example's (an example sized for a 122B MoE model asks 8 nodes of 16).

Order: the spec's ``launch.nproc_per_node`` / ``launch.nnodes`` where the user wrote them; else the accelerators the
target runtime probe found at G0 (NPUs, else CUDA devices) on one node; on a host without one, the rank count G6
runs (at least 2: the distributed gate's own size)."""

from __future__ import annotations

import re
from typing import Any


def launch_size(launch: Any, runtime: dict[str, Any] | None) -> dict[str, Any]:
    """``{"nproc_per_node", "nnodes", "why"}`` for the delivered launch script."""
    given = getattr(launch, "model_fields_set", set())
    runtime = runtime or {}
    if "nproc_per_node" in given:
        nproc, why = launch.nproc_per_node, f"nproc_per_node {launch.nproc_per_node} from the spec's launch settings"
        sized_by = "spec"
    else:
        npus = int(runtime.get("npu_count") or 0)
        cudas = int((runtime.get("cuda") or {}).get("count") or 0)
        if npus or cudas:
            nproc, sized_by = npus or cudas, "accelerators"
            why = f"nproc_per_node {nproc}: the {nproc} {'NPU' if npus else 'CUDA device'}(s) the runtime probe found"
        else:
            nproc, sized_by = max(2, getattr(launch, "nproc_per_node", 2)), "gate"
            why = f"nproc_per_node {nproc}: no accelerator found by the runtime probe, the rank count G6 runs"
    nnodes = getattr(launch, "nnodes", 1)
    why += f"; nnodes {nnodes} " + ("from the spec's launch settings" if "nnodes" in given else "(the default: one node)")
    # the distributed gate's own rank count (G6 launches max(2, launch.nproc_per_node) on the host it runs on)
    # ``sized_by``: where the per-node count came from — the user's spec or the accelerators found are the run's
    # size; the gate's own rank count on a host without accelerators is only a stand-in for one
    return {"nproc_per_node": nproc, "nnodes": nnodes, "why": why, "sized_by": sized_by,
            "gate_ranks": max(2, getattr(launch, "nproc_per_node", 2))}


# the per-node process count and node count, as the framework's launch scripts spell them
_NPROC_VARS = ("NPUS_PER_NODE", "GPUS_PER_NODE", "NPROC_PER_NODE")
_NODES_VARS = ("NNODES",)


def _set_var(text: str, names: tuple[str, ...], value: int) -> tuple[str, int]:
    total = 0
    for name in names:
        # NAME=8, export NAME=8, NAME=${NAME:-8}: the number is replaced, an environment override stays possible
        pattern = re.compile(rf"^(\s*(?:export\s+)?{name}=(?:\$\{{{name}:-)?)\d+", re.M)
        text, n = pattern.subn(lambda m: f"{m.group(1)}{value}", text)
        total += n
    return text, total


def size_launch_script(text: str, size: dict[str, Any]) -> str:
    """``text`` with its per-node process count and node count set to ``size``; raises ValueError when the script
    names neither (a launch script whose size cannot be set is not delivered with the example's size)."""
    text, n_proc = _set_var(text, _NPROC_VARS, size["nproc_per_node"])
    if not n_proc:
        text, n_proc = re.subn(r"(--nproc[_-]per[_-]node[ =])\d+", lambda m: f"{m.group(1)}{size['nproc_per_node']}",
                               text)
    text, n_nodes = _set_var(text, _NODES_VARS, size["nnodes"])
    if not n_nodes:
        text, n_nodes = re.subn(r"(--nnodes[ =])\d+", lambda m: f"{m.group(1)}{size['nnodes']}", text)
    if not n_proc or not n_nodes:
        missing = [w for w, n in (("processes per node", n_proc), ("node count", n_nodes)) if not n]
        raise ValueError(f"the launch script sets no {' or '.join(missing)} that can be sized")
    return text


def script_size(text: str) -> tuple[int | None, int | None]:
    """(processes per node, nodes) a launch script asks for, read the way ``size_launch_script`` writes them."""
    def first(names: tuple[str, ...], flag: str) -> int | None:
        for name in names:
            m = re.search(rf"^\s*(?:export\s+)?{name}=(?:\$\{{{name}:-)?(\d+)", text, re.M)
            if m:
                return int(m.group(1))
        m = re.search(rf"{flag}[ =](\d+)", text)
        return int(m.group(1)) if m else None

    return first(_NPROC_VARS, r"--nproc[_-]per[_-]node"), first(_NODES_VARS, "--nnodes")


_LOOPBACK = ("localhost", "127.0.0.1", "::1", "0.0.0.0")
_ADDR_FLAG = re.compile(r"--master[_-]addr[ =][\"']?(?P<value>[^\s\"']+)")


def script_sets(text: str, name: str) -> str | None:
    """The value the script gives ``name`` (``export X=v``, ``X=v``, ``X=${X:-v}``, quoted or not), None if none."""
    m = None
    for m in re.finditer(rf"^\s*(?:export\s+)?{re.escape(name)}=(?:\$\{{{re.escape(name)}:-)?[\"']?([^\s\"'}}]*)",
                         text, re.M):
        pass
    return m.group(1) if m else None


_RDZV = re.compile(r"--rdzv[_-](?P<what>endpoint|backend)[ =][\"']?(?P<value>[^\s\"']+)")


def rdzv_settings(text: str) -> dict[str, str]:
    """The literal ``--rdzv_endpoint`` / ``--rdzv_backend`` a torchrun line of the script passes ({"endpoint": ...,
    "backend": ...}; a value that is a shell variable is left out: the user's shell decides it)."""
    return {m.group("what"): m.group("value") for m in _RDZV.finditer(text) if "$" not in m.group("value")}


def endpoint_host(endpoint: str) -> str:
    """The host of a ``host[:port]`` endpoint (``[v6]:port`` too)."""
    if endpoint.startswith("["):
        return endpoint[1:].split("]", 1)[0]
    return endpoint.rsplit(":", 1)[0] if endpoint.count(":") == 1 else endpoint


def master_addr(text: str) -> str | None:
    """The rendezvous address the script hands torchrun: a literal ``--master_addr``, else the ``MASTER_ADDR`` it
    sets (which may itself be a variable the user's shell decides)."""
    flag = _ADDR_FLAG.search(text)
    return flag.group("value") if flag and "$" not in flag.group("value") else script_sets(text, "MASTER_ADDR")


def _node_findings(text: str, nnodes: int | None, planned: dict[str, Any] | None,
                   script: str) -> list[dict[str, Any]]:
    """More than one node where the run's size says otherwise (the spec's ``launch.nnodes``, one by default), and a
    multi-node rendezvous at a loopback address, which no other node can reach: torchrun waits at the rendezvous for
    nodes that never join."""
    if nnodes is None or nnodes <= 1:
        return []
    name = next((n for n in _NODES_VARS if re.search(rf"^\s*(?:export\s+)?{n}=", text, re.M)), "--nnodes")
    out = []
    want = (planned or {}).get("nnodes")
    if isinstance(want, int) and want != nnodes:
        out.append({"severity": "error", "code": "launch-size", "path": script, "value": nnodes, "key": name,
                    "message": f"{script} sets {name} (torchrun --nnodes) to {nnodes}, but this run is sized for "
                               f"{want} node(s) ({(planned or {}).get('why', 'the spec')}): torchrun waits at the "
                               f"rendezvous for {nnodes - want} node(s) that are never started; set it to {want}",
                    "suggestion": f"{name}={want}"})
    addr = master_addr(text)
    if addr in _LOOPBACK:
        out.append({"severity": "error", "code": "launch-size", "path": script, "value": nnodes, "key": name,
                    "message": f"{script} starts {nnodes} nodes with MASTER_ADDR={addr}, a loopback address no "
                               f"other node can reach: the other nodes never join the rendezvous; set {name} to 1 "
                               f"for one host, or MASTER_ADDR to the first node's address",
                    "suggestion": f"{name}=1"})
    return out[:1]


def launch_size_findings(text: str, runtime: dict[str, Any] | None, script: str,
                         planned: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """G3: the process and node counts the launch script asks for, against what G0's runtime probe found: at least
    one of each, and no more processes per node than the accelerators found (none found: the host runs CPU ranks,
    any positive count); the node count against the run's size (``planned``: the plan's ``launch_size``) and the
    rendezvous address. The gates launch with their own sizes, so a script's own default is checked only here."""
    nproc, nnodes = script_size(text)
    runtime = runtime or {}
    npus = int(runtime.get("npu_count") or 0)
    cudas = int((runtime.get("cuda") or {}).get("count") or 0)
    found = npus or cudas
    kind = "NPU" if npus else "CUDA device"
    out = []
    for what, value, names, flag in (("processes per node", nproc, _NPROC_VARS, "--nproc_per_node"),
                                     ("nodes", nnodes, _NODES_VARS, "--nnodes")):
        if value is None:
            continue
        name = next((n for n in names if re.search(rf"^\s*(?:export\s+)?{n}=", text, re.M)), flag)
        sized = (planned or {}).get("nproc_per_node") if (planned or {}).get("sized_by") in ("spec", "accelerators") \
            else None
        fit = (found or 2) if what == "processes per node" else 1
        if value < 1:
            why = f"{value} {what}: torchrun starts no rank (at least 1)"
        elif what == "processes per node" and found and value > found:
            why = f"{value} {what}, but the runtime probe found {found} {kind}(s) on this node"
        elif what == "processes per node" and isinstance(sized, int) and value != sized:
            # another rank count than the run is sized for trains another global batch on other devices
            why = (f"{value} {what}, but this run is sized for {sized} ({planned.get('why', 'the spec')}): the "
                   f"data-parallel ranks and the global batch are not the run's")
            fit = sized
        else:
            continue
        out.append({"severity": "error", "code": "launch-size", "path": script, "value": value, "key": name,
                    "message": f"{script} sets {name} (torchrun {flag}) to {why}; set it to {fit}"
                               + (f" (the {kind}s found)" if what == "processes per node" and found else ""),
                    "suggestion": f"{name}={fit}"})
    return out + _node_findings(text, nnodes, planned, script)
