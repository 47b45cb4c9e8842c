"""The training parity's verdict (``training_parity.py``): the tolerances, the step-1 gradients compared per parameter
group, and what the two sides' records say — a group without gradient, a gradient that differs (a common scale named:
a loss scale, or a reduction that sums over the ranks), a loss or grad norm off the source's, no learning. Pure
comparisons on the records both sides wrote (the tolerances' argument is the probe's module doc); imports nothing from
msmigrate.
"""
import math

LOSS_RTOL = 1e-4
GRAD_NORM_RTOL = 1e-3
GRAD_RTOL = 1e-3
LEARN_FRACTION = 0.005
LEARN_FLOOR = 1e-4


def group_of(name):
    """A parameter's group: its name up to the first layer index (or without the parameter's own name), at most
    three parts — ``model.visual.blocks.0.attn.qkv.weight`` → ``model.visual.blocks``, ``model.visual.merger.mlp.0.
    weight`` → ``model.visual.merger``, ``lm_head.weight`` → ``lm_head``."""
    parts = name.split(".")
    cut = next((i for i, p in enumerate(parts) if p.isdigit()), len(parts) - 1)
    return ".".join(parts[:max(1, min(cut, 3))])


def grad_parity(source_grads, target_grads, source_names):
    """Per group at step 1: parameters, how many got no gradient in the migrated model, max |Δ| relative to the
    group's largest source gradient, and the norm ratio target / source."""
    import torch

    groups = {}
    for name in source_names:
        if name not in source_grads:
            continue  # the source trains it not (frozen there): nothing to compare
        g = groups.setdefault(group_of(name), {"params": 0, "missing": [], "dmax": 0.0, "gmax": 0.0,
                                                "src_sq": 0.0, "tgt_sq": 0.0})
        g["params"] += 1
        s = source_grads[name]
        g["gmax"] = max(g["gmax"], float(s.abs().max()) if s.numel() else 0.0)
        g["src_sq"] += float((s.double() ** 2).sum())
        t = target_grads.get(name)
        if t is None or t.shape != s.shape:
            g["missing"].append(name)
            continue
        g["tgt_sq"] += float((t.double() ** 2).sum())
        g["dmax"] = max(g["dmax"], float(torch.nan_to_num((t - s).abs(), nan=float("inf")).max()) if s.numel() else 0.0)
    out = []
    for name, g in groups.items():
        rel = g["dmax"] / g["gmax"] if g["gmax"] > 0 else (0.0 if g["dmax"] == 0 else float("inf"))
        ratio = math.sqrt(g["tgt_sq"] / g["src_sq"]) if g["src_sq"] > 0 else None
        out.append({"group": name, "params": g["params"], "no_grad": len(g["missing"]),
                    "no_grad_names": g["missing"][:3], "max_rel_dgrad": rel, "norm_ratio": ratio,
                    "ok": not g["missing"] and rel <= GRAD_RTOL})
    return out


def scale_cause(ratio, nproc):
    """What a gradient scale common to every group says: N× over N ranks is the data-parallel reduction summing
    instead of averaging (FSDP2 asks the backend for the mean; see ``cpu_shim.gloo_averages``), anything else a loss
    scale."""
    if nproc > 1 and abs(ratio - nproc) <= GRAD_RTOL * nproc:
        return (f"every group's gradient is {nproc}× the source's over {nproc} ranks: the data-parallel gradient "
                "reduction sums the ranks' gradients instead of averaging them (FSDP2 asks for ReduceOp.AVG; a "
                "backend that runs it as a sum — gloo in torch 2.7 without the CPU patches — or a reduce op or divide "
                "factor set to SUM)")
    return f"every group's gradient is {ratio:.4g}× the source's: a loss scale (a loss divided by the accumulation " \
           "steps twice?)"


def learning_problem(before, after, fraction, steps, source_fall=None):
    """None when the migrated model learns: its fixed-batch loss falls by ``fraction``, or — falling less — by no
    less than the source's own fall on the same batch (within the loss tolerance) and by ≥ LEARN_FLOOR."""
    fall = (before - after) / abs(before) if before else 0.0
    if fall >= fraction:
        return None
    if source_fall is not None and fall >= LEARN_FLOOR and fall >= source_fall - LOSS_RTOL:
        return None
    judged = (f"; the source's own loss on that batch fell {source_fall:.3%} on the same steps" if source_fall is
              not None else "")
    floor = f" (and ≥ {LEARN_FLOOR:g} where the source falls less)" if source_fall is not None else ""
    return (f"no learning: the loss on a fixed batch went {before:.6g} → {after:.6g} in {steps} steps (needs to fall "
            f"by ≥ {fraction:.1%}, or as much as the source's own{floor}{judged}; a lower lr needs more steps: "
            "launch.parity_steps)")


def verdict(source_recs, target_recs, groups, before, after, fraction, cause, nproc=1, source_fall=None):
    problems = []
    bad = next((g for g in groups if not g["ok"]), None)
    if bad is not None:
        if bad["no_grad"]:
            without = [g["group"] for g in groups if g["no_grad"]]
            problems.append(f"step 1: parameter group {bad['group']} gets no gradient in the migrated model for "
                            f"{bad['no_grad']} of its {bad['params']} parameters (e.g. {bad['no_grad_names'][0]}), "
                            f"the source trains them (groups without gradient: {', '.join(without)}): a frozen "
                            "module, or an output detached before the loss")
        else:
            ratios = {round(g["norm_ratio"], 4) for g in groups if g["norm_ratio"]}
            scale = ("; " + scale_cause(next(iter(ratios)), nproc) if len(ratios) == 1 and ratios != {1.0}
                     else "")
            problems.append(f"step 1: parameter group {bad['group']} gradient differs from the source's (max "
                            f"|Δ| {bad['max_rel_dgrad']:.3g} of its largest gradient, tol {GRAD_RTOL:g}; norm "
                            f"ratio {bad['norm_ratio'] if bad['norm_ratio'] is None else round(bad['norm_ratio'], 4)})"
                            f"{scale}")
    if not groups:
        problems.append("step 1: no gradients to compare (the source step recorded none)")
    for i, (s, t) in enumerate(zip(source_recs, target_recs), 1):
        if not (abs(s["loss"] - t["loss"]) <= LOSS_RTOL * max(1.0, abs(s["loss"]))):
            problems.append(f"step {i}: loss {t['loss']:.7g} vs source {s['loss']:.7g} (tol {LOSS_RTOL:g}·max(1, "
                            f"|loss|))" + (f": {cause}" if i == 1 and cause else ""))
            break
    for i, (s, t) in enumerate(zip(source_recs, target_recs), 1):
        if not (abs(s["grad_norm"] - t["grad_norm"]) <= GRAD_NORM_RTOL * max(1e-6, abs(s["grad_norm"]))):
            problems.append(f"step {i}: global grad norm {t['grad_norm']:.6g} vs source {s['grad_norm']:.6g} "
                            f"(tol {GRAD_NORM_RTOL:g} relative)")
            break
    if len(source_recs) != len(target_recs):
        problems.append(f"{len(target_recs)} target steps vs {len(source_recs)} source steps")
    learning = learning_problem(before, after, fraction, len(target_recs), source_fall)
    if learning:
        problems.append(learning)
    return problems
