"""G4: the size of the target optimizer's first step, measured against what an Adam step is (runs in the target
runtime; imports nothing from msmigrate).

At step 1 Adam's bias-corrected moments are m̂ = g and v̂ = g², so each weight with a gradient moves by
lr · g / (|g| + ε): by about lr whenever ε is small against the gradient (AdamW's decoupled decay, lr · wd · θ, comes
on top and is taken out here). That holds for any model and any source, so it needs no oracle: the median over the
parameter tensors of (per tensor, the median over its elements with a non-zero gradient of) |Δθ| / lr is about 1 for
a working Adam-family optimizer, and far below it when ε swamps the gradients (an ε of 1.0 against gradients of
1e-4 moves each weight by ~1e-4 · lr) — a loss that still falls a little over a few steps hides that. Clipping scales
g but leaves |g| / (|g| + ε) near 1 unless the clipped gradients reach ε themselves. Below ``RATIO_FLOOR`` (0.5: half
the step every element should take) the check fails. Optimizers outside the Adam family step differently and are
not examined (``examined: false``).
"""

RATIO_FLOOR = 0.5


def snapshot(params, full):
    """(parameter, weights before the step, its gradient as clipped) for the parameters with a gradient."""
    return [(p, full(p.detach()).float().clone(), full(p.grad.detach()).float().clone()) for p in params]


def _median(values):
    return sorted(values)[len(values) // 2]


def first_step(optimizer, snap, full):
    """The first step's size over lr, per parameter tensor, after ``optimizer.step()``."""
    name = type(optimizer).__name__
    if "adam" not in name.lower():
        return {"examined": False, "why_not": f"{name} is not an Adam-family optimizer"}
    group_of = {id(p): g for g in optimizer.param_groups for p in g["params"]}
    ratios, grads, eps = [], [], set()
    for p, before, grad in snap:
        group = group_of.get(id(p))
        if group is None or not group.get("lr"):
            continue
        lr, wd = float(group["lr"]), float(group.get("weight_decay") or 0.0)
        live = grad != 0
        if not bool(live.any()):
            continue
        step = full(p.detach()).float() - before * (1 - lr * wd)
        ratios.append(float((step[live].abs() / lr).median()))
        grads.append(float(grad[live].abs().median()))
        eps.add(group.get("eps"))
    if not ratios:
        return {"examined": False, "why_not": "no parameter with a gradient and a positive lr"}
    return {"examined": True, "optimizer": name, "median_step_over_lr": _median(ratios),
            "median_abs_grad": _median(grads), "tensors": len(ratios), "eps": sorted(e for e in eps if e is not None)}


def problem(facts):
    """The verdict's problem line, or None."""
    if not facts or not facts.get("examined") or facts["median_step_over_lr"] >= RATIO_FLOOR:
        return None
    eps = ", ".join(f"{e:g}" for e in facts["eps"]) or "?"
    return (f"the target optimizer's first step moved the weights by a median {facts['median_step_over_lr']:.2g} x lr "
            f"(per parameter tensor, weight decay taken out) where an Adam step moves every weight with a gradient "
            f"by about lr (lr*|g|/(|g|+eps) at step 1): its eps {eps} against the gradients' median "
            f"|g| {facts['median_abs_grad']:.2g} divides the update away; the delivered optimizer settings "
            f"(training.adam_eps) cripple training")
