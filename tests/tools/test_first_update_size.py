"""G4's first-step size: an Adam step moves every weight with a gradient by about lr, whatever the model or the
source, so an optimizer whose epsilon swamps the gradients is seen without an oracle. Real torch optimizers on a
small model; the probe's sibling module is imported as the target runtime imports it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import msmigrate

sys.path.insert(0, str(Path(msmigrate.__file__).parent / "tools" / "probes"))
from _update_size import RATIO_FLOOR, first_step, problem, snapshot  # noqa: E402


def _one_step(optimizer_for, clip=1.0):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4))
    opt = optimizer_for(model.parameters())
    loss = model(torch.randn(8, 16)).pow(2).mean()
    loss.backward()
    params = [p for p in model.parameters() if p.grad is not None]
    torch.nn.utils.clip_grad_norm_(params, clip)
    snap = snapshot(params, lambda t: t)
    opt.step()
    return first_step(opt, snap, lambda t: t)


@pytest.mark.parametrize("make", [lambda ps: torch.optim.AdamW(ps, lr=1e-4),
                                  lambda ps: torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.1),
                                  lambda ps: torch.optim.AdamW(ps, lr=1e-4, eps=1e-6),
                                  lambda ps: torch.optim.Adam(ps, lr=1e-5, weight_decay=0.01)])
def test_a_working_adam_step_moves_each_weight_by_about_lr(make):
    facts = _one_step(make)
    assert facts["examined"] and facts["median_step_over_lr"] > 0.9 and problem(facts) is None


def test_an_epsilon_that_swamps_the_gradients_is_a_crippled_step():
    facts = _one_step(lambda ps: torch.optim.AdamW(ps, lr=1e-4, eps=1.0))
    assert facts["median_step_over_lr"] < RATIO_FLOOR
    msg = problem(facts)
    assert msg and "training.adam_eps" in msg and "eps 1 " in msg


def test_other_optimizers_are_not_examined():
    facts = _one_step(lambda ps: torch.optim.SGD(ps, lr=1e-4))
    assert facts == {"examined": False, "why_not": "SGD is not an Adam-family optimizer"} and problem(facts) is None


def test_the_g4_line_routes_to_the_config():
    from msmigrate.knowledge.classifier import classify

    line = problem(_one_step(lambda ps: torch.optim.AdamW(ps, lr=1e-4, eps=1.0)))
    c = classify("", gate_verdict=[f"training parity: {line}"])
    assert c.case_id == "parity-training-step-crippled" and c.owner == "config"
