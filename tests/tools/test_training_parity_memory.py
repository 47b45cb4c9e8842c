"""G4's one-process training parity holds one model's training state at a time (training_parity.one_process): the
shared initial weights wait on disk while the target trains, the target's step-1 gradients wait on disk while the
source trains, and the source trained is read back from those weights strictly. At real scale (333M parameters)
the source model and a copy of every gradient beside the target's weights, gradients and Adam state made G4's probe
the largest process of a run (~9.7 GB). The two sides are stand-ins here (small torch modules): what is checked is
the orchestration — which models are alive while each side trains, and that what the source side gets is exactly
what the target started from and computed."""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

PROBES = Path(__file__).resolve().parents[2] / "msmigrate" / "tools" / "probes"


@pytest.fixture
def tp(monkeypatch):
    monkeypatch.syspath_prepend(str(PROBES))
    import training_parity

    return training_parity


def _live(cls) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is cls)


def test_one_model_at_a_time_and_the_handoffs_are_exact(tp, monkeypatch, tmp_path):
    import torch

    class Source(torch.nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.w = torch.nn.Linear(4, 4)

    class Plugin(Source):
        pass

    torch.manual_seed(7)
    start_weights = {k: v.clone() for k, v in Source(None).state_dict().items()}
    seen = {}

    def initial_pair(args, src_cls, src_cfg, plg_cls, plg_cfg):
        torch.manual_seed(8)  # other weights than a rebuild from the seed: the source side must get these
        source, plugin = Source(None), Plugin(None)
        source.load_state_dict(start_weights)
        plugin.load_state_dict(start_weights)
        return source, plugin, "eager", "shared random init", None, None

    def target_side(args, cfg, dataset, collate_fn, settings, plugin, grads_sink, precheck=None):
        assert precheck({"fixed": True}) is None
        seen["sources_while_target_trains"] = _live(Source)
        grads_sink(iter([("w.weight", torch.full((4, 4), 3.0)), ("w.bias", torch.ones(4))]))
        return {"recs": [{"loss": 1.0, "grad_norm": 1.0}], "per_rank": [[{"fixed": True}]]}

    def source_side(args, take_source, fresh_source, tgt, target_grads, settings, src_keys, nproc, before):
        source = take_source()
        seen["plugins_while_source_trains"] = _live(Plugin)
        seen["source_weights"] = {k: v.clone() for k, v in source.state_dict().items()}
        seen["grads"] = {k: v.clone() for k, v in target_grads.items()}
        seen["before"] = before
        return [], [], "step", None, None

    monkeypatch.setattr(tp, "initial_pair", initial_pair)
    monkeypatch.setattr(tp, "target_side", target_side)
    monkeypatch.setattr(tp, "source_side", source_side)
    monkeypatch.setattr(tp, "build", lambda cls, cfg: cls(cfg))
    monkeypatch.setattr(tp, "source_precheck", lambda source, fixed, keys, dtype, step: (None, 2.5))
    args = SimpleNamespace(seed=0, dtype="fp32", step=None)
    monkeypatch.setattr(tp, "ready", lambda model, a: model)
    found = tp.one_process(args, time.monotonic(), str(tmp_path), (Source, None, Plugin, None),
                           ({}, None, None, {}), None)
    assert found is not None and found[2:] == ("eager", "shared random init")
    assert seen["sources_while_target_trains"] == 0  # Plugin subclasses Source; _live counts the exact class
    assert seen["plugins_while_source_trains"] == 0
    assert all(torch.equal(seen["source_weights"][k], v) for k, v in start_weights.items())
    assert torch.equal(seen["grads"]["w.weight"], torch.full((4, 4), 3.0)) and torch.equal(seen["grads"]["w.bias"],
                                                                                            torch.ones(4))
    assert seen["before"] == 2.5
    sys.modules.pop("training_parity", None)
