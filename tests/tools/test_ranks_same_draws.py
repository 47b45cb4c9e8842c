"""The N-rank training parity's check that data-parallel ranks draw their own shares (``probes/_ranks.py:
same_draws``): ranks whose micro batches are the same ids step by step, from a dataset with a sample per rank at
least, are named (a loader without the rank-splitting sampler); ranks that drew different samples, one rank, a
dataset smaller than the rank count (a sampler pads it by repeating) and batches without ids are not. The message
is routed to the YAML's dataloader settings."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import msmigrate
from msmigrate.knowledge.classifier import classify

sys.path.insert(0, str(Path(msmigrate.__file__).parent / "tools" / "probes"))
from _ranks import same_draws  # noqa: E402  (a probe module: runs in the target runtime, imported here by path)


def _batches(*rows):
    return [{"input_ids": torch.tensor([row]), "labels": torch.tensor([row])} for row in rows]


def test_ranks_that_drew_the_same_batches_are_named_and_routed_to_the_yaml():
    rank = _batches([1, 2, 3], [4, 5, 6])
    problem = same_draws([rank, _batches([1, 2, 3], [4, 5, 6])], samples=4, settings={"dataloader_mode": "base"})
    assert problem.startswith("all 2 ranks drew the same 2 micro batches")
    assert "data.dataloader_param {'dataloader_mode': 'base'}" in problem
    verdict = classify(f"training parity (2 ranks): {problem}")
    assert (verdict.case_id, verdict.owner) == ("ranks-draw-same-share", "config")


def test_own_shares_one_rank_a_short_dataset_and_no_ids_are_not_findings():
    assert same_draws([_batches([1, 2]), _batches([3, 4])], samples=4) is None  # each its own share
    assert same_draws([_batches([1, 2]), _batches([1, 2], [9, 9])], samples=4) is None  # differ in count
    assert same_draws([_batches([1, 2])], samples=4) is None
    assert same_draws([_batches([1, 2]), _batches([1, 2])], samples=1) is None  # padded by the sampler
    assert same_draws([[{"pixel_values": torch.zeros(1)}], [{"pixel_values": torch.zeros(1)}]], samples=4) is None
