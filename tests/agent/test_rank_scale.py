"""G6's N-rank training parity: a uniform N× gradient with an agreeing loss is "not comparable", never a pass, and
anything else stays a failure."""

from msmigrate.agent.routes.fsdp2.gates.training import uniform_rank_scale


def record(ratios, dloss=1e-6):
    return {"grad_groups": [{"group": f"g{i}", "norm_ratio": r} for i, r in enumerate(ratios)],
            "max_dloss": dloss, "source": {"loss": [6.2, 6.1]}, "tolerance": {"loss_rtol": 1e-4}}


def test_every_group_exactly_n_times_with_the_loss_agreeing_is_not_comparable():
    why = uniform_rank_scale(record([2.0, 2.0, 2.0]), 2)
    assert why and "2×" in why and "not a pass" in why


def test_a_mixed_or_other_scale_or_a_loss_that_differs_stays_a_failure():
    assert uniform_rank_scale(record([2.0, 1.0]), 2) is None  # one group right, one doubled: a migration fault
    assert uniform_rank_scale(record([0.5, 0.5]), 2) is None  # a loss scale (divided twice)
    assert uniform_rank_scale(record([2.0, 2.0], dloss=0.05), 2) is None  # the curve differs too
    assert uniform_rank_scale(record([1.0, 1.0]), 1) is None
    assert uniform_rank_scale(None, 2) is None
