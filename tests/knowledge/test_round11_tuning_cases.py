"""Catalog patterns added from round 11's tuning half: each exact library message decides its owner, and a near miss
(the words in a healthy run's lines, or a neighbouring message that does not decide the owner) is not taken for it."""

import pytest

from msmigrate.knowledge.classifier import classify

TB = "Traceback (most recent call last):\n  File \"train.py\", line 12, in <module>\n    main()\n"

CASES = [
    ("rendezvous-host-unresolvable", "environment",
     "ValueError: host not found: Name or service not known"),
    # a module of an installed library lacking a name, printed without quotes around the module
    ("library-api-missing", "environment",
     "AttributeError: module diffusers has no attribute WanTransformer3DModel. Did you mean: 'Transformer2DModel'?"),
    ("media-file-unreadable", "data",
     "tarfile.ReadError: unexpected end of data @ <_io.BufferedReader name='shards/train-000042.tar'>"),
    ("parallel-sizes-invalid", "config",
     "AssertionError: The ulysses_size should be equal to the world size."),
    ("parallel-sizes-invalid", "config",
     "ValueError: context parallel size should be divisible by the world size"),
]


@pytest.mark.parametrize("case_id,owner,message", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_the_exact_message_decides_the_case_and_owner(case_id, owner, message):
    result = classify(TB + message)
    assert (result.case_id, result.owner, result.method) == (case_id, owner, "regex")


NEAR_MISSES = [
    "INFO c10d: resolving host master-0 (host not found: Name or service not known, retrying in 5 s)\n"
    "INFO rendezvous complete for 2 nodes\nstep 10 loss 1.23\n",
    "INFO shard train-000042.tar: tarfile.ReadError unexpected end of data, skipped by the handler\n"
    "step 10 loss 1.23\n",
]


@pytest.mark.parametrize("log", NEAR_MISSES)
def test_the_words_in_a_healthy_run_flag_nothing(log):
    assert classify(log).owner is None


NEIGHBOURS = [
    # the project's own module lacking a name is not an installed library's API
    ("library-api-missing", "AttributeError: module my_project.models has no attribute 'build'"),
    # a refused connection to a host that resolved is not a name that does not resolve
    ("rendezvous-host-unresolvable",
     "torch.distributed.DistNetworkError: Connection refused (master-0, 29500)"),
    # another tarfile error (a file that is no tar at all) says nothing about a truncated shard
    ("media-file-unreadable", "tarfile.ReadError: file could not be opened successfully"),
]


@pytest.mark.parametrize("case_id,message", NEIGHBOURS, ids=[c[0] for c in NEIGHBOURS])
def test_a_neighbouring_message_is_not_taken_for_the_case(case_id, message):
    assert classify(TB + message).case_id != case_id
