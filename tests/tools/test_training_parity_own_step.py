"""Training parity's source side where the source ships training code (the Phi-3.5-vision-layout fixture's own
fine-tuning script): the probe trains the source through ITS OWN loss path on the target's micro batches, the labels
put back into the source's own convention first. Checked against the source's own pipeline: a batch its dataset and
collator build, handed to the probe the way the target feeds it (aligned labels), gives the loss the source's own
code computes on its own batch — and its training step moves the weights."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from msmigrate.testbeds.fixtures import build_source
from msmigrate.tools.repo_reader.training_facts import source_training_facts

PROBES = Path(__file__).resolve().parents[2] / "msmigrate" / "tools" / "probes"


@pytest.fixture(scope="module", params=["phi3_v", "deepseek_vl_v2"])
def phi3_v(tmp_path_factory, request):
    """phi3_v trains through the model's own .loss; deepseek_vl_v2 through its Trainer's compute_loss override."""
    sys.path.insert(0, str(PROBES))
    import _own_pipeline
    import training_parity

    folder = build_source(request.param, tmp_path_factory.mktemp(request.param) / "src")
    facts = source_training_facts(folder)
    batches = _own_pipeline.own_batches(str(folder), str(folder / "data" / "train.json"), facts, 2)
    yield _own_pipeline, training_parity, folder, facts, batches
    sys.path.remove(str(PROBES))


def _model(folder):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, trust_remote_code=True, torch_dtype=torch.float32)


def test_own_loss_path_on_target_batches_equals_the_sources_own(phi3_v):
    import torch

    own, tp, folder, facts, batches = phi3_v
    assert facts["kind"] == "own" and facts["label_convention"] in ("aligned", "pre-shifted")
    model = _model(folder)
    model.eval()
    loss_of = tp.own_loss_of(facts, str(folder))
    for _, batch in batches:
        with torch.no_grad():
            reference = float(own.own_forward(model, dict(batch), facts, str(folder))[1])
            as_target_feeds = own.aligned_batch(batch, facts)  # what the target's trainer hands the plugin
            assert float(loss_of(model, as_target_feeds)) == pytest.approx(reference, abs=1e-6)


def test_the_own_step_trains_and_records_what_the_parity_compares(phi3_v):
    import torch

    own, tp, folder, facts, batches = phi3_v
    model = _model(folder)
    model.train()
    settings = {"lr": 1e-3, "weight_decay": 0.0, "betas": (0.9, 0.999), "eps": 1e-8, "clip_grad": 1.0,
                "gradient_accumulation_steps": 1}
    target_fed = [own.aligned_batch(b, facts) for _, b in batches]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    recs = tp.train(model, target_fed, settings, tp.plain_adamw(model, settings), loss_of=tp.own_loss_of(
        facts, str(folder)))
    assert len(recs) == 2 and all(r["loss"] > 0 and r["grad_norm"] > 0 for r in recs)
    assert "grads" in recs[0] and any("vision" in n for n in recs[0]["grads"])  # the tower trains too
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
    assert tp.own_training_facts(None) is None


def test_a_pre_shifted_source_gets_its_labels_pre_shifted():
    """Target batches carry labels aligned with the ids; a source whose training code pre-shifts them (label i is
    token i+1, its loss does not shift) must see them that way, or its loss trains the token two ahead."""
    sys.path.insert(0, str(PROBES))  # the probe imports its siblings when called, as in the target runtime
    try:
        _pre_shift_check()
    finally:
        sys.path.remove(str(PROBES))


def _pre_shift_check():
    import torch
    import training_parity as tp

    seen = {}

    def model(**batch):
        seen.update(batch)
        return {"loss": torch.tensor(1.0), "logits": torch.zeros(1)}

    aligned = torch.tensor([[-100, 5, 6, 7]])
    tp.own_loss_of({"kind": "own", "label_convention": "pre-shifted", "trainer": None}, "/nonexistent")(
        model, {"input_ids": torch.tensor([[4, 5, 6, 7]]), "labels": aligned})
    assert seen["labels"].tolist() == [[5, 6, 7, -100]]
    tp.own_loss_of({"kind": "own", "label_convention": "aligned", "trainer": None}, "/nonexistent")(
        model, {"input_ids": torch.tensor([[4, 5, 6, 7]]), "labels": aligned})
    assert seen["labels"].tolist() == aligned.tolist()
