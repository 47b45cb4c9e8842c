"""The ``slurm_cluster`` fixture: a real slurmctld + two slurmd (+ munged) on this host for tests/slurm, or a skip
that says why (binaries missing: ``apt-get install -y slurm-wlm munge``; not root: the daemons need it)."""

from __future__ import annotations

import os

import pytest

from slurm_cluster import missing_binaries, start_cluster


@pytest.fixture(scope="package")  # torn down when tests/slurm is done, not at the end of the whole suite
def slurm_cluster(tmp_path_factory):
    missing = missing_binaries()
    if missing:
        pytest.skip(f"Slurm binaries missing ({', '.join(missing)}): apt-get install -y slurm-wlm munge")
    if os.geteuid() != 0:
        pytest.skip("the test cluster's slurmd and munged run as root; run the slurm tests as root")
    cluster = start_cluster(tmp_path_factory.mktemp("slurm"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLURM_CONF", str(cluster.conf))  # every client (sbatch, squeue, …) and subprocess finds it
        try:
            yield cluster
        finally:
            cluster.stop()
