"""The compute dtype of ``training_parity.py --dtype``: fp32 (the default), or bf16 computed the way the delivered
config trains on NPU. MindSpeed-MM's FSDP2 route wraps the model with ``MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32)`` from its ``fsdp_plan``: the sharded parameters (and the optimizer's state) stay fp32, each
forward/backward runs on a bf16 copy of them with the module inputs cast to bf16, and the gradients come back to
fp32 before they are reduced and accumulated. ``bf16_compute`` does the same in one process, on both sides of the
parity (like with like), so a migration is compared as it will run there, not only in fp32.

Tolerances per dtype (``TOLERANCES``): fp32 as argued in ``training_parity.py``. bf16 keeps 8 mantissa bits (unit
roundoff 2^-8 ≈ 3.9e-3): two sides running the same weights through kernels that sum in another order now differ by
~4e-3 relative per rounded op instead of ~6e-8, and the argument that gave fp32 1e-4 on the loss and 1e-3 on the norm
and per-group gradients gives ~1e-2 and ~5e-2. The learning check keeps its fraction but its floor (what a model that
does not learn moves by) rises from fp32 noise to bf16's: a step too small to change a bf16 weight leaves the loss
where it was, and one that flips a rounding moves it by ~1e-3; the floor is 2e-3. The figures measured on the
stand-in are in benchmarks/RESULTS.md (training parity in bf16)."""

import contextlib

TOLERANCES = {
    "fp32": {"loss_rtol": 1e-4, "grad_norm_rtol": 1e-3, "grad_rtol": 1e-3, "learn_floor": 1e-4},
    "bf16": {"loss_rtol": 1e-2, "grad_norm_rtol": 5e-2, "grad_rtol": 5e-2, "learn_floor": 2e-3},
}
TORCH_DTYPE = {"fp32": "float32", "bf16": "bfloat16"}


def torch_dtype(name):
    import torch

    return getattr(torch, TORCH_DTYPE[name])


def cast_inputs(batch, dtype):
    """The batch as FSDP2's ``cast_forward_inputs`` hands it to the model: floating tensors (and lists of them) in
    the compute dtype, everything else as it was."""
    import torch

    def cast(v):
        return v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v

    return {k: ([cast(x) for x in v] if isinstance(v, list) else cast(v)) for k, v in batch.items()}


@contextlib.contextmanager
def bf16_compute(model, name):
    """Inside: the model's parameters are their ``name``-dtype copies (buffers stay as they are, as under FSDP2);
    on leaving, each gradient computed inside comes back in fp32 and is added to the fp32 gradient held before
    (accumulation over micro batches in the reduce dtype), and the fp32 parameters are restored. A no-op for fp32."""
    if name == "fp32":
        yield
        return
    dtype = torch_dtype(name)
    params = list(model.parameters())
    held = []
    for p in params:
        held.append((p.data, p.grad))
        p.grad = None
        p.data = p.data.to(dtype)
    try:
        yield
    finally:
        for p, (master, before) in zip(params, held):
            new = p.grad
            p.grad = None
            p.data = master
            if new is not None:
                new = new.to(master.dtype)
                p.grad = new if before is None else before + new
            else:
                p.grad = before
