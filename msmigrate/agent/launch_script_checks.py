"""G3 on the delivered launch script beyond its size (launch_size.py): what the gates' own launches establish and
the script must establish too, since no gate runs the script itself.

- **ports**: every port the script sets (``MASTER_PORT=…``, ``${MASTER_PORT:-…}``, ``--master_port …``) is a TCP
  port, 1 to 65535: torchrun's rendezvous cannot bind another.
- **the route's environment**: the variables the target's own code on the trainer's import path compares with a
  literal (``os.getenv("NON_MEGATRON", "") != "true"`` in the packages that hold the entry point, and the entry point
  itself), where the gates' launches set them (``ROUTE_ENV``): the gates proved training under that value, so the
  script must export the same one. The names and the comparison are read from the target, not assumed.
- **parallel sizes**: each integer ``parallel.*_parallel_size`` of the YAML divides the ranks the script starts.
- **rank variables**: an entry point whose package reads torchrun's rank variables (``RANK``, ``LOCAL_RANK``,
  ``WORLD_SIZE``) with no default must be started by a launcher that sets them (torchrun, ``python -m
  torch.distributed.run`` …) or have them exported: started by plain ``python`` it fails on the first read.
- **line continuations**: a line whose backslash is followed by whitespace before its end is not continued (the
  shell escapes the space, the newline ends the command): the command stops there and the next line runs as a
  command of its own — the trainer starts without the arguments that follow.
- **the rendezvous host**: every gate launch rendezvous at ``127.0.0.1``; the script's own ``MASTER_ADDR`` (or
  ``--master_addr``) names a host only the runtime's resolver decides. A single-node script's host name (or an
  address that is not a loopback one) is resolved and connected to in the runtime (``probes/rendezvous_host.py``, a one-rank ``TCPStore`` as torchrun's rank 0
  starts). A name the machine gives itself (``localhost``, its host name) that does not resolve is the runtime's
  resolver's (``/etc/hosts``: environment); another name is the script's (config).
"""

from __future__ import annotations

import ast
import ipaddress
import re
from pathlib import Path
from typing import Any, Callable

from msmigrate.agent.launch_size import endpoint_host, master_addr, rdzv_settings, script_sets, script_size
from msmigrate.core.python_files import parsed_files
from msmigrate.tools.launcher.command import ROUTE_ENV

_PORT_SET = re.compile(r"^\s*(?:export\s+)?(?P<name>\w*PORT)=(?:\$\{(?P=name):-)?(?P<value>-?\d+)", re.M)
_PORT_FLAG = re.compile(r"(?P<name>--master[_-]port)[ =](?P<value>-?\d+)")
MAX_PORT = 65535


_BROKEN_CONTINUATION = re.compile(r"\\[ \t]+$")


def continuation_findings(text: str, script: str) -> list[dict[str, Any]]:
    """A line continuation broken by whitespace after its backslash (comments left out)."""
    out = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("#") or not _BROKEN_CONTINUATION.search(line):
            continue
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        out.append({"severity": "error", "code": "launch-continuation", "path": script, "key": f"line {i + 1}",
                    "value": line.strip(),
                    "message": f"line {i + 1} of {script} ends in a backslash followed by whitespace: the shell does "
                               f"not continue it, so the command ends at `{line.strip()[:80]}` and the next line "
                               f"(`{nxt[:60]}`) runs as a command of its own; remove the whitespace after the "
                               "backslash"})
    return out


def port_findings(text: str, script: str) -> list[dict[str, Any]]:
    """A port the script sets outside 1..65535."""
    out = []
    for m in [*_PORT_SET.finditer(text), *_PORT_FLAG.finditer(text)]:
        value = int(m.group("value"))
        if 1 <= value <= MAX_PORT:
            continue
        out.append({"severity": "error", "code": "launch-port", "path": script, "key": m.group("name"), "value": value,
                    "message": f"{script} sets {m.group('name')} to {value}, which is no TCP port (1 to {MAX_PORT}): "
                               f"torchrun's rendezvous cannot listen on it; set {m.group('name')} to a free port in "
                               f"that range"})
    return out


def rendezvous_host(text: str) -> str | None:
    """The host a single-node script rendezvous at, when it is a literal name or address (not a loopback address,
    not a variable the user's shell decides); None otherwise, and for a multi-node script (its master is another
    machine, resolved where that machine's network is)."""
    nodes = script_size(text)[1]
    if nodes is not None and nodes > 1:
        return None
    rdzv = rdzv_settings(text)
    # torchrun meets at --rdzv_endpoint where the line gives one (any backend), else at the master address
    host = endpoint_host(rdzv["endpoint"]) if rdzv.get("endpoint") else master_addr(text)
    if not host or "$" in host:
        return None
    try:
        # an address literal is probed too (another cluster's node-0 copied into a one-node script), except a
        # loopback one: every gate launch rendezvous there
        return None if ipaddress.ip_address(host).is_loopback else host
    except ValueError:
        return host


def rendezvous_findings(text: str, script: str, probe: Callable[[str], dict[str, Any] | None]) -> list[dict[str, Any]]:
    """The script's rendezvous host as the runtime resolves it: ``probe(host)`` is the rendezvous_host probe's
    result in the runtime (None when it could not run: nothing is concluded)."""
    host = rendezvous_host(text)
    result = probe(host) if host else None
    if not result or result.get("connects"):
        return []
    what = "does not resolve" if not result.get("resolves") else \
        f"resolves to {', '.join(result.get('addresses') or [])} but takes no connection"
    rdzv = rdzv_settings(text)
    if rdzv.get("endpoint"):
        backend = f" with --rdzv_backend {rdzv['backend']}" if rdzv.get("backend") else ""
        message = (f"{script} rendezvous at --rdzv_endpoint {rdzv['endpoint']}{backend}; {host} {what} in the "
                   f"target runtime ({result.get('problem')}): no rank gets past the rendezvous; for one node drop "
                   f"--rdzv_backend / --rdzv_endpoint (torchrun's own rendezvous at the master address, 127.0.0.1) or "
                   f"name an endpoint this host reaches")
        return [{"severity": "error", "code": "launch-rendezvous-host", "path": script, "key": "--rdzv_endpoint",
                 "value": rdzv["endpoint"], "message": message}]
    found = f"{script} rendezvous at MASTER_ADDR={host}"
    if result.get("own_name"):  # the machine's own name: the runtime's resolver lacks the entry
        code = "rendezvous-host-unresolved"
        message = (f"{found}, this machine's own name, which {what} in the target runtime ({result.get('problem')}): "
                   f"the runtime's resolver (/etc/hosts, its NSS configuration) lacks the entry, so torchrun's rank 0 "
                   f"cannot start its store; add `127.0.0.1 {host}` to /etc/hosts of the runtime (the gates' own "
                   f"launches use 127.0.0.1)")
    else:
        code = "launch-rendezvous-host"
        message = (f"{found}, which {what} in the target runtime ({result.get('problem')}): torchrun's rank 0 cannot "
                   f"start its store there; set MASTER_ADDR to this machine's address (127.0.0.1 for one node) or a "
                   f"name that resolves")
    return [{"severity": "error", "code": code, "path": script, "key": "MASTER_ADDR", "value": host,
             "message": message}]


def _env_reads(tree: ast.AST) -> dict[str, str]:
    """Variable -> the string literal the code compares its value with (``os.getenv("X", d) == "v"``,
    ``os.environ.get("X") != "v"``, ``os.environ["X"] == "v"``)."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or len(node.comparators) != 1:
            continue
        sides = [node.left, node.comparators[0]]
        name = next((n for n in map(_env_name, sides) if n), None)
        literal = next((s.value for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)), None)
        if name and literal is not None:
            found.setdefault(name, literal)
    return found


def _env_name(node: ast.AST) -> str | None:
    """X for ``os.getenv("X", …)``, ``os.environ.get("X", …)``, ``os.environ["X"]``; None otherwise."""
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = ast.unparse(node.func)
        if func in ("os.getenv", "os.environ.get", "getenv", "environ.get"):
            return str(node.args[0].value)
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("os.environ", "environ") and \
            isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    return None


def import_path_env(target: Path, entry: str) -> dict[str, str]:
    """The variables the entry point's import path compares with a literal: the ``__init__.py`` of each package
    that holds the entry (outermost first: Python imports them before it) and the entry file itself."""
    entry_path = Path(target) / entry
    files = []
    folder = entry_path.parent
    while folder != Path(target) and Path(target) in folder.parents:
        files.insert(0, folder / "__init__.py")
        folder = folder.parent
    files.append(entry_path)
    reads: dict[str, str] = {}
    for _, tree in parsed_files(files):
        for name, literal in _env_reads(tree).items():
            reads.setdefault(name, literal)
    return reads


def route_env_findings(text: str, script: str, target: Path, entries: list[str]) -> list[dict[str, Any]]:
    """A variable the target's import path reads and the gates' launches set that the script does not export with
    the gates' value."""
    out = []
    for entry in entries:
        reads = import_path_env(target, entry)
        for name, value in ROUTE_ENV.items():
            if name not in reads:
                continue
            given = script_sets(text, name)
            if given == value:
                continue
            said = f"sets {name}={given}" if given is not None else f"does not set {name}"
            out.append({"severity": "error", "code": "launch-env", "path": script, "key": name, "value": given,
                        "message": f"{script} {said}: the target's code on {entry}'s import path reads {name} "
                                   f"(compared with '{reads[name]}'), and every gate launched the trainer with "
                                   f"{name}={value}; export {name}={value} in {script}"})
    return out


def parallel_size_findings(cfg: dict[str, Any], text: str, script: str, config: str) -> list[dict[str, Any]]:
    """A parallel size of the YAML (``parallel.*_parallel_size``, an integer) that does not divide the ranks the
    launch script starts (its processes per node × nodes): each is a dimension of the device mesh the ranks are laid
    out on, so the world size must be a multiple of it (``auto`` is derived from the world size: never wrong)."""
    nproc, nnodes = script_size(text)
    section = cfg.get("parallel") if isinstance(cfg, dict) else None
    if not nproc or not isinstance(section, dict):
        return []
    world = nproc * (nnodes or 1)
    out = []
    for key, value in section.items():
        if not str(key).endswith("_parallel_size") or isinstance(value, bool) or not isinstance(value, int) or \
                value < 1 or world % value == 0:
            continue
        out.append({"severity": "error", "code": "value-out-of-range", "path": f"parallel.{key}", "value": value,
                    "message": f"parallel.{key} is {value}, but {script} starts {world} rank(s) ({nproc} per node "
                               f"× {nnodes or 1} node(s)): a parallel size is a dimension of the device mesh and must "
                               f"divide the world size; set parallel.{key} in {config} to a divisor of {world} "
                               f"(or auto)"})
    return out


def _int_leaves(node: Any, key: str, path: str = "") -> list[tuple[str, int]]:
    """Every integer ``key`` leaf under ``node``, with its dotted path."""
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            dotted = f"{path}.{k}" if path else str(k)
            if k == key and isinstance(v, int) and not isinstance(v, bool):
                out.append((dotted, v))
            else:
                out += _int_leaves(v, key, dotted)
    return out


def data_parallel_ranks(cfg: dict[str, Any], text: str) -> int | None:
    """The data-parallel ranks of the launch: the world size the script starts over the integer parallel sizes of
    the YAML that are not data parallelism (FSDP shards within it); None when the script states no size."""
    nproc, nnodes = script_size(text)
    if not nproc:
        return None
    other = 1
    section = cfg.get("parallel") if isinstance(cfg, dict) else None
    for key, value in section.items() if isinstance(section, dict) else []:
        if str(key).endswith("_parallel_size") and key not in ("fully_shard_parallel_size", "data_parallel_size") \
                and isinstance(value, int) and not isinstance(value, bool) and value > 1:
            other *= value
    return max(1, nproc * (nnodes or 1) // other)


def sample_count_findings(cfg: dict[str, Any], text: str, script: str, config: str) -> list[dict[str, Any]]:
    """A sample cap (``max_samples``) below what one step of the ranks the launch script starts takes: with
    ``drop_last`` the sampler gives each data-parallel rank ``max_samples // ranks`` samples and drops a rank's last
    partial batch, so fewer than ranks × ``micro_batch_size`` samples yields no batch at all. The data-parallel ranks
    are the world size over the integer parallel sizes that are not data parallelism (FSDP shards within it)."""
    nproc, nnodes = script_size(text)
    if not nproc or not isinstance(cfg, dict):
        return []
    data, training = cfg.get("data"), cfg.get("training")
    loader = data.get("dataloader_param") if isinstance(data, dict) else None
    if not isinstance(loader, dict) or loader.get("drop_last") is not True or not isinstance(training, dict):
        return []
    mbs = training.get("micro_batch_size")
    if not isinstance(mbs, int) or isinstance(mbs, bool) or mbs < 1:
        return []  # a size out of range is the range check's
    world = nproc * (nnodes or 1)
    ranks = data_parallel_ranks(cfg, text) or 1
    need = ranks * mbs
    return [{"severity": "error", "code": "value-out-of-range", "path": path, "value": value,
             "message": f"{path} is {value}, but {script} starts {world} rank(s) ({ranks} data-parallel) with "
                        f"training.micro_batch_size {mbs} and drop_last: one step takes {need} samples, so the "
                        f"sampler yields no batch; raise {path} in {config} to at least {need} (or remove it)",
             "minimum": need}
            for path, value in _int_leaves(data, "max_samples", "data") if 0 < value < need]


RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE")  # what torchrun (torch.distributed.run) sets for each process
_LAUNCHERS = re.compile(r"\b(?:torchrun|torch\.distributed\.(?:run|launch)|deepspeed|accelerate\s+launch|mpirun|srun|"
                        r"msrun)\b")


def _required_env(tree: ast.AST) -> set[str]:
    """Variables read with no default (``os.environ["X"]``, one-argument ``os.getenv("X")`` / ``environ.get``)."""
    out = set()
    for node in ast.walk(tree):
        name = _env_name(node)
        if name and (isinstance(node, ast.Subscript) or (isinstance(node, ast.Call) and len(node.args) == 1 and
                                                          not node.keywords)):
            out.add(name)
    return out


def rank_env_findings(text: str, script: str, target: Path, entries: list[str]) -> list[dict[str, Any]]:
    """An entry started by plain python whose package (the folder above the entry's own: ``pkg/fsdp`` for
    ``pkg/fsdp/train/x.py``) reads a rank variable with no default that the script does not set."""
    joined = text.replace("\\\n", " ")
    out = []
    for entry in entries:
        commands = [line for line in joined.splitlines() if entry in line and not line.lstrip().startswith("#")]
        if not commands or any(_LAUNCHERS.search(c.split(entry)[0]) for c in commands):
            continue
        root = (Path(target) / entry).parent.parent
        needed: set[str] = set()
        for _, tree in parsed_files(sorted(root.rglob("*.py"))):
            needed |= _required_env(tree) & set(RANK_VARIABLES)
        missing = sorted(n for n in needed if script_sets(text, n) is None)
        if missing:
            out.append({"severity": "error", "code": "launch-env", "path": script, "key": missing[0], "value": None,
                        "message": f"{script} starts {entry} without a distributed launcher (plain python) and sets "
                                   f"no {', '.join(missing)}: the target's code under {root.relative_to(target)} reads "
                                   f"{', '.join(missing)} with no default, which torchrun sets for each rank; start "
                                   f"it with torchrun $DISTRIBUTED_ARGS as the target's examples do"})
    return out
