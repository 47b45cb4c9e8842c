"""``training_parity.py --dtype bf16``: both sides compute as MindSpeed-MM's FSDP2 mixed precision trains on NPU
(param_dtype bf16, reduce_dtype fp32): bf16 forward/backward on a copy of fp32 master weights, gradients back in fp32
and accumulated there; and the bf16 tolerances replace the fp32 ones in every check."""

from __future__ import annotations

import sys

import pytest
import torch

from msmigrate.tools.runtime import PROBES_DIR


@pytest.fixture
def probes():
    sys.path.insert(0, str(PROBES_DIR))
    try:
        import _precision
        import training_parity

        yield _precision, training_parity
    finally:
        sys.path.remove(str(PROBES_DIR))
        training_parity.use_dtype("fp32")


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def test_bf16_compute_trains_fp32_masters_on_bf16_gradients(probes):
    precision, _ = probes
    model, ref = _model(), _model()
    x1, x2 = torch.randn(4, 8), torch.randn(4, 8)
    masters = [(p.data.data_ptr(), p.data.clone()) for p in model.parameters()]
    for x in (x1, x2):  # two micro batches: the second gradient adds to the first, in fp32
        with precision.bf16_compute(model, "bf16"):
            assert all(p.dtype == torch.bfloat16 for p in model.parameters())
            out = model(precision.cast_inputs({"x": x}, torch.bfloat16)["x"])
            assert out.dtype == torch.bfloat16
            out.float().sum().backward()
    # the same fp32 tensors, untouched
    assert all(p.data.data_ptr() == ptr and torch.equal(p.data, was) for p, (ptr, was) in zip(model.parameters(),
                                                                                              masters))
    assert all(p.dtype == p.grad.dtype == torch.float32 for p in model.parameters())
    # the reference: each micro batch's gradient on a bf16 copy, summed in fp32
    want = [torch.zeros_like(p) for p in ref.parameters()]
    for x in (x1, x2):
        copy = _model().to(torch.bfloat16)
        copy(x.to(torch.bfloat16)).float().sum().backward()
        want = [w + p.grad.float() for w, p in zip(want, copy.parameters())]
    assert all(torch.equal(p.grad, w) for p, w in zip(model.parameters(), want))
    # and it is not the fp32 gradient: the switch changes the arithmetic
    for x in (x1, x2):
        ref(x).sum().backward()
    assert any(not torch.equal(p.grad, r.grad) for p, r in zip(model.parameters(), ref.parameters()))


def test_fp32_is_a_no_op_and_inputs_keep_their_kinds(probes):
    precision, _ = probes
    model = _model()
    with precision.bf16_compute(model, "fp32"):
        assert all(p.dtype == torch.float32 for p in model.parameters())
    batch = precision.cast_inputs({"ids": torch.ones(2, dtype=torch.long), "pix": torch.ones(2),
                                   "many": [torch.ones(1)], "flag": True}, torch.bfloat16)
    assert batch["ids"].dtype == torch.long and batch["pix"].dtype == torch.bfloat16
    assert batch["many"][0].dtype == torch.bfloat16 and batch["flag"] is True


def test_the_train_step_in_bf16_differs_from_fp32_within_the_bf16_tolerance(probes):
    """The probe's own step (``train``) on a tiny LM-shaped model: bf16 and fp32 curves from one init are not
    bit-equal and stay within the bf16 loss tolerance of each other; the verdict reads the dtype's tolerances."""
    _, tp = probes

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.emb, self.head = torch.nn.Embedding(32, 16), torch.nn.Linear(16, 32)

        def forward(self, input_ids, labels, use_cache=False):
            logits = self.head(torch.tanh(self.emb(input_ids)))
            loss = torch.nn.functional.cross_entropy(logits.float()[:, :-1].reshape(-1, 32), labels[:, 1:].reshape(-1))
            return type("Out", (), {"loss": loss})()

    torch.manual_seed(1)
    batches = [{"input_ids": (ids := torch.randint(0, 32, (2, 12))), "labels": ids.clone()} for _ in range(6)]
    settings = {"gradient_accumulation_steps": 2, "clip_grad": 1.0, "lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8,
                "weight_decay": 0.0}
    curves = {}
    for dtype in ("fp32", "bf16"):
        model = Tiny()
        curves[dtype] = tp.train(model, batches, settings, tp.plain_adamw(model, settings), dtype=dtype)
        assert all(p.dtype == torch.float32 for p in model.parameters())
    fp32, bf16 = ([r["loss"] for r in curves[d]] for d in ("fp32", "bf16"))
    assert fp32 != bf16 and len(fp32) == 3
    tp.use_dtype("bf16")
    assert (tp.LOSS_RTOL, tp.GRAD_NORM_RTOL, tp.GRAD_RTOL) == (1e-2, 5e-2, 5e-2)
    assert not [p for p in tp.verdict(curves["fp32"], curves["bf16"], [{"ok": True}], 1.0, 0.5, 0.005, None)
                if "loss" in p and "step" in p]
    tp.use_dtype("fp32")
    assert (tp.LOSS_RTOL, tp.GRAD_NORM_RTOL, tp.GRAD_RTOL, tp.LEARN_FLOOR) == (1e-4, 1e-3, 1e-3, 1e-4)
