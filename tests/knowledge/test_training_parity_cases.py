"""G4/G6 training-parity and HF-export failures route to their owner: the problem lines come from the probe's own
verdict code (not hand-written), prefixed as the gates prefix them, and the classifier must name the case."""

from __future__ import annotations

import sys

import pytest

from msmigrate.knowledge.classifier import classify
from msmigrate.tools.runtime import PROBES_DIR


@pytest.fixture(scope="module")
def tp():
    sys.path.insert(0, str(PROBES_DIR))
    try:
        import training_parity
    finally:
        sys.path.remove(str(PROBES_DIR))
    return training_parity


def _group(name, **kw):
    return {"group": name, "params": 2, "no_grad": 0, "no_grad_names": [], "max_rel_dgrad": 0.0, "norm_ratio": 1.0,
            "ok": True, **kw}


def _lines(tp, source, target, groups, before=6.0, after=5.5, cause=None):
    return tp.verdict(source, target, groups, before, after, 0.005, cause)


@pytest.mark.parametrize("prefix", ["training parity", "training parity (2 ranks)", "training parity (real weights)"])
def test_each_training_parity_failure_names_its_case(tp, prefix):
    recs = [{"loss": 6.0, "grad_norm": 2.0}, {"loss": 5.9, "grad_norm": 1.9}]
    frozen = _group("model.visual.patch_embed", no_grad=2, no_grad_names=["model.visual.patch_embed.proj.weight"],
                    norm_ratio=0.0, ok=False)
    scaled = [_group("model.visual.blocks", max_rel_dgrad=0.5, norm_ratio=0.5, ok=False),
              _group("lm_head", max_rel_dgrad=0.5, norm_ratio=0.5, ok=False)]
    shifted = [{"loss": 6.3, "grad_norm": 2.0}, recs[1]]
    cases = {
        "parity-training-no-gradient": _lines(tp, recs, recs, [frozen, _group("lm_head")]),
        "parity-training-curve-differs": _lines(tp, recs, recs, scaled),
        "parity-training-no-learning": _lines(tp, recs, recs, [_group("lm_head")], 6.0, 6.0),
    }
    labels = _lines(tp, recs, shifted, [_group("lm_head")], cause="labels are shifted twice: ...")
    assert labels and "labels are shifted twice" in labels[0]
    cases["parity-training-curve-differs-labels"] = labels
    for case, lines in cases.items():
        gate = [f"{prefix}: {line}" for line in lines[:1]]
        c = classify("", gate_verdict=gate)
        assert c.case_id == case.removesuffix("-labels"), (case, gate, c)
    owners = {classify("", gate_verdict=[f"{prefix}: {ln}" for ln in lines[:1]]).owner for lines in cases.values()}
    assert owners == {"model", "config"}


def test_optimizer_skip_and_export_failures_route_to_the_model():
    skip = ("training parity: the target optimizer skips parameter group model.visual.merger: 4 parameters get a "
            "gradient but are in none of its param groups (e.g. model.visual.merger.ln_q.weight), so they never train")
    c = classify("", gate_verdict=[skip])
    assert c.case_id == "parity-training-curve-differs" and c.owner == "model"
    export = ("hf export: the export is not the checkpoint: 1 tensors missing (e.g. ['lm_head.weight']), 0 differ "
              "(e.g. [])")
    c = classify("", gate_verdict=[export])
    assert c.case_id == "hf-export-differs" and c.owner == "model"
