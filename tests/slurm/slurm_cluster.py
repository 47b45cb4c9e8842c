"""A real Slurm cluster on this host for the tests: munged + slurmctld + two slurmd (nodes ``n1`` and ``n2``, both
this host, as Debian's slurmd runs several per host) from Debian's slurm-wlm, all state, sockets, logs and ports
private to a temporary folder, torn down (process by process) at the end.

The config is the smallest one that runs real jobs without cgroups or accounting: ``proctrack/linuxproc``,
``task/none``, ``jobacct_gather/none``, ``accounting_storage/none`` (so ``sacct`` fails and the launcher reads end
states from ``scontrol show job``, kept for ``MinJobAge`` seconds). The host's CPUs (``nproc``) are split between the
nodes; each node's address is 127.0.0.1, so a two-node job's rendezvous goes through ``NodeAddr`` as on a cluster
whose node names are not host names. Clients find it through ``SLURM_CONF``."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sacct")


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]


def _which(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


NODES = ("n1", "n2")


@dataclass
class Cluster:
    root: Path
    conf: Path
    nodes: tuple[str, ...]
    cpus: int  # per node
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def log(self, name: str) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted((self.root / "log").glob(name)))

    def stop(self) -> None:
        for proc in reversed(self.procs):  # the slurmd, slurmctld, then munged
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def write_conf(root: Path, host: str, cpus: int, munge_socket: Path) -> Path:
    ctl_port = _free_port()
    nodes = "".join(f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={_free_port()} CPUs={cpus} "
                    "State=UNKNOWN\n" for n in NODES)
    conf = root / "slurm.conf"
    conf.write_text(f"""\
ClusterName=msmtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctl_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
{nodes}PartitionName=debug Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP
""")
    return conf


def start_cluster(root: Path, timeout_s: float = 60.0) -> Cluster:
    """Start munged, slurmctld and slurmd under ``root``; returns once the node accepts jobs."""
    for sub in ("state", "run", "log", "munge", *(f"spool/{n}" for n in NODES)):
        (root / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(root / "munge", 0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    sock = root / "munge" / "munge.socket"
    host, cpus = socket.gethostname().split(".")[0], max(1, (os.cpu_count() or 1) // len(NODES))
    conf = write_conf(root, host, cpus, sock)
    cluster = Cluster(root=root, conf=conf, nodes=NODES, cpus=cpus)
    env = {**os.environ, **cluster.env}
    try:
        cluster.procs.append(subprocess.Popen(
            [_which("munged"), "-F", "-f", f"--socket={sock}", f"--key-file={key}",
             f"--log-file={root}/log/munged.log", f"--pid-file={root}/run/munged.pid",
             f"--seed-file={root}/munge/munged.seed"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        _wait(lambda: sock.exists(), timeout_s, "munged socket", cluster)
        cluster.procs.append(subprocess.Popen([_which("slurmctld"), "-D", "-i", "-f", str(conf)], env=env,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        _wait(lambda: _ok(["scontrol", "ping"], env) and "UP" in _out(["scontrol", "ping"], env), timeout_s,
              "slurmctld", cluster)
        for node in NODES:
            cluster.procs.append(subprocess.Popen([_which("slurmd"), "-D", "-f", str(conf), "-N", node], env=env,
                                                  stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        _wait(lambda: _out(["sinfo", "-h", "-N", "-o", "%t"], env).split() == ["idle"] * len(NODES), timeout_s,
              "slurmd (nodes idle)", cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _ok(argv: list[str], env: dict[str, str]) -> bool:
    return subprocess.run(argv, env=env, capture_output=True, timeout=30).returncode == 0


def _out(argv: list[str], env: dict[str, str]) -> str:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30).stdout


def _wait(cond, timeout_s: float, what: str, cluster: Cluster) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in cluster.procs):
            break
        try:
            if cond():
                return
        except (subprocess.SubprocessError, OSError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{what} did not come up:\nslurmctld: {cluster.log('slurmctld.log')}\n"
                       f"slurmd: {cluster.log('slurmd-*.log')}\nmunged: {cluster.log('munged.log')}")
