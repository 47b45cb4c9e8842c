"""G6's 2-rank training parity gates: a difference fails G6 naming its cause. Both real-MindSpeed-MM readings that once
differed were the harness (the probe's optimizer built over FSDP2's unsharded root parameters; the probes' rank setup
skipping the CPU patches on a CUDA build of torch without a GPU, so gloo summed FSDP2's AVG reduce-scatter:
tests/standin/test_gloo_averages.py), so no N-rank difference is excused any more."""

from types import SimpleNamespace

import pytest

from msmigrate.agent.routes.fsdp2.gates import training


class Res:
    ok = True
    error = None

    def __init__(self):
        self.data = {"summary": {"steps": 5, "global_batch_size": 2, "first_loss": 6.2, "last_loss": 6.0,
                                 "loss_finite": True}, "device": "cpu"}


@pytest.fixture
def gate(monkeypatch):
    monkeypatch.setattr(training, "run_launch", lambda *a, **k: (Res(), {"label": "G6", "log_excerpt": ""},
                                                                [6.2, 6.1, 6.0, 5.9, 5.8]))
    monkeypatch.setattr(training, "training_problems", lambda res, losses, label: [])
    monkeypatch.setattr(training, "sharded_parity_check",
                        lambda *a: ({"label": "sharded"}, [], {"status": "pass"}))

    def run(found):
        monkeypatch.setattr(training, "training_parity_check",
                            lambda deps, state, nproc, **work: ({"label": "tp", "log_excerpt": ""}, found,
                                                                {"status": "fail" if found else "pass",
                                                                 "nproc": nproc}))
        deps = SimpleNamespace(spec=SimpleNamespace(launch=SimpleNamespace(nproc_per_node=2, gate_train_iters=5)))
        return training.gate_distributed(deps, {"plan": {}, "gates": {}})

    return run


def test_a_two_rank_training_parity_that_differs_fails_g6_naming_the_cause(gate):
    cause = ("training parity: step 1: parameter group lm_head gradient differs from the source's (max |Δ| 1 of its "
             "largest gradient, tol 0.001; norm ratio 2.0); every group's gradient is 2× the source's over 2 ranks: "
             "the data-parallel gradient reduction sums the ranks' gradients instead of averaging them")
    record = gate([cause])
    assert record["passed"] is False
    assert record["summary"].startswith("training parity (2 ranks): step 1: parameter group lm_head")
    assert "sums the ranks' gradients instead of averaging" in record["summary"]
    assert record["parity"]["training"]["status"] == "fail"


def test_a_two_rank_training_parity_that_agrees_passes_g6(gate):
    record = gate([])
    assert record["passed"] is True and record["parity"]["training"] == {"status": "pass", "nproc": 2}


def test_the_two_rank_probe_is_sized_by_the_slower_of_g6_and_g4(monkeypatch):
    """The N-rank probe's limit follows the slower measured step: G6's own launch or G4's one process."""
    seen = {}
    g6 = {"label": "G6", "log_excerpt": "", "seconds": 90.0, "metrics": {"median_step_ms": 8000.0}}
    monkeypatch.setattr(training, "run_launch", lambda *a, **k: (Res(), g6, [6.2, 6.1, 6.0, 5.9, 5.8]))
    monkeypatch.setattr(training, "training_problems", lambda res, losses, label: [])
    monkeypatch.setattr(training, "sharded_parity_check", lambda *a: ({"label": "sharded"}, [], {"status": "pass"}))

    def parity(deps, state, nproc, **work):
        seen.update(work)
        return {"label": "tp"}, [], {"status": "pass"}

    monkeypatch.setattr(training, "training_parity_check", parity)
    g4 = {"evidence": [{"seconds": 196.0, "metrics": {"losses": [1.0], "median_step_ms": 25000.0}}]}
    deps = SimpleNamespace(spec=SimpleNamespace(launch=SimpleNamespace(nproc_per_node=2, gate_train_iters=5)))
    training.gate_distributed(deps, {"plan": {}, "gates": {"G4": g4}})
    assert seen == {"step_s": 25.0, "setup_s": 196.0}
