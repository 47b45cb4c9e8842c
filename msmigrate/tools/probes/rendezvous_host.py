"""Probe: does the launch script's rendezvous host resolve and take a connection in the target runtime (runs IN
the target runtime; imports nothing from msmigrate).

    python rendezvous_host.py --host <MASTER_ADDR as the delivered launch script sets it>

Every gate launch and probe of msmigrate rendezvous at ``127.0.0.1``; the user's launch uses the script's own
``MASTER_ADDR`` (a host name such as ``localhost`` or the machine's name), which only the runtime's resolver
(``/etc/hosts``, NSS, a site hook) decides. As torchrun's rank 0 does, this imports ``torch.distributed``, resolves
the name, then starts a one-rank ``TCPStore`` at it (a server on a free port and a client that connects to the
name). Prints one line ``MSMIGRATE_PROBE_RESULT {json}``: ``host``, ``own_name`` (``localhost`` or a name the
machine gives itself), ``resolves``, ``connects``, ``addresses``,
``problem`` (the runtime's own error text) — a problem is a finding, not a failure of the probe.
"""
import datetime
import socket
import sys

from _one_arg import one_arg_main

STORE_TIMEOUT_S = 10


def check(host):
    import torch.distributed as dist  # imported first, as in a rank: a site hook acting on its import applies

    own = {"localhost", socket.gethostname()}
    out = {"host": host, "own_name": host.lower() in {n.lower() for n in own if n},
           "resolves": False, "connects": False, "addresses": [], "problem": None}
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        out["problem"] = f"{type(exc).__name__}: {exc}"
        return out
    out["resolves"] = True
    out["addresses"] = sorted({info[4][0] for info in infos})
    try:
        store = dist.TCPStore(host, 0, 1, True, timeout=datetime.timedelta(seconds=STORE_TIMEOUT_S))
        store.set("msmigrate", "1")
        out["connects"] = True
    except Exception as exc:  # probe boundary: the runtime's own error is the finding
        out["problem"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return out


def main(argv):
    return one_arg_main(argv, __doc__, "--host", check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
