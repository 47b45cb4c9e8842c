"""Probe (gate G4, training parity): K optimizer steps of the source and of the migrated model, compared step by
step. Runs in the target runtime; imports nothing from msmigrate.

    python training_parity.py --model <source folder> --target <root> --plugin <entry> ... --model-id <id>
                              --model-name-or-path <source folder> --config <delivered yaml> [--steps 20]

One shared random init, as in ``model_parity.py``: the SOURCE class on a shrunk copy of the source config with a fixed
seed, its state dict loaded (strict) into the PLUGIN class resolved in the target's registry. Same samples in the same
order: the target's own pipeline (the delivered config's dataset, collator and ``build_mm_dataloader`` with
``micro_batch_size``), ``steps × gradient_accumulation_steps`` micro batches drawn once and fed to both sides.

- Target side, the target trainer's path: the engine's loss function on the model (``features.loss_cfg``), each micro
  batch's ``output.loss / gradient_accumulation_steps`` backpropagated, the global grad norm clipped at ``clip_grad``
  over the parameters that have a gradient, the optimizer the target's own ``Trainer.get_optimizer`` builds from the
  delivered config.
- Source side: the source's training step. Where the source ships training code (``--source-training``: the plan's
  facts, ``kind: own``), its own loss path — its ``Trainer.compute_loss`` override where it has one, else the
  model's ``.loss`` as the HF Trainer calls it (``_own_pipeline.own_forward``) — on each micro batch put into the
  source's own label convention (a source that pre-shifts its labels gets them pre-shifted), with the HF Trainer's
  optimizer (AdamW over the trainable parameters) at the delivered settings. Without training code: the HF class's
  own loss with the same AdamW. ``--source-step FILE.py:function`` (or ``module:function``) plugs in the user's own
  step, for a source with no loss or training code of its own (a forward that returns logits only): its loss form
  ``function(model, batch) -> loss`` is the source's loss path on each whole micro batch (labels aligned with the
  ids, as the target feeds them), inside the same step and AdamW; its loop form ``function(model, micro_batches,
  settings) -> [{"loss", "grad_norm"}, ...]`` is the whole source side, the first record carrying ``grads``
  ({name: tensor} before clipping) for the step-1 gradient parity (``_source_step.py``). The source side runs
  without what the plugin package's import patched into the source's own code (``as_the_source``: a fused-kernel
  wrapper on a library class the source runs would otherwise be on both sides of the comparison, its backward too).

Both sides use the delivered optimizer settings (lr, weight decay, betas, eps, clip_grad) at a CONSTANT learning rate:
a warmup or decay in the delivered config is set aside on both sides (recorded), so only the step itself is compared.
fp32, CPU, one process, dropout 0 (as ``model_parity``); ``--dtype bf16``: both sides compute in bf16 as the
delivered FSDP2 plan does on NPU, fp32 master weights and optimizer (``_precision.py``, its tolerances there).

Checks (tolerances, fp32): per-step loss |Δ| ≤ ``LOSS_RTOL``·max(1, |loss|) and global grad norm |Δ| ≤
``GRAD_NORM_RTOL``·max(1e-6, norm). fp32 carries 24 mantissa bits (unit roundoff 6e-8); the two sides run the same
weights through kernels that may sum in another order (another attention path, a fused op), which leaves ~1e-6
relative differences in a forward of a few layers; Adam's update is normalised per element, so such a difference
moves the weights by ~lr·1e-6 per step and the curves stay within ~1e-5 relative over tens of steps. 1e-4 on the loss
leaves a decade of headroom and is still three decades below any real defect (a wrong loss scale, a lost gradient,
labels off by one all move the loss or the norm by percent). The grad norm sums squares over every parameter, so a
small relative error in many elements compounds: 1e-3. (In bf16 — 8 mantissa bits, unit roundoff 4e-3 — the same
argument gives ~1e-2 on the loss and ~5e-2 on the norm: ``--dtype bf16``, ``_precision.TOLERANCES``.) Step 1 per parameter group
(the name up to its first layer index, at most three parts: ``model.visual.blocks``, ``lm_head``): every
parameter the source trains gets a gradient in the migrated model, and max |Δgrad| ≤ ``GRAD_RTOL``·max |grad| of the
group (1e-3, same argument). The first group that differs is named, with the ratio of the gradient norms (a uniform
ratio ≠ 1 over all groups is a loss scale). Learning: the migrated model's loss on a fixed batch (the first micro
batch) must fall by at least ``LEARN_FRACTION`` (0.5 %) of its start value within the K steps: the same batch,
the same weights and no dropout make the loss of a model that does not learn move by nothing but fp32 noise (~1e-6
relative), so 0.5 % is three decades above it, and low enough for a delivered lr of 1e-5 (the real qwen2_vl
example's: its fixed-batch loss falls 1.1 % in 20 steps on the shrunk model; the stand-in's lr 1e-4: 8 %). A lower
lr needs more steps (``launch.parity_steps``). Where the fixed-batch loss falls less than that, the source is the
judge: the source's own loss on the same fixed batch, before and after ITS K steps on the same micro batches, falls
no more (within the loss tolerance) — a model that learns slowly at the delivered settings (a scaled-down LM head, a
tied embedding) is not a migration fault — and the fall is still ≥ ``LEARN_FLOOR`` (1e-4, two decades above the fp32
noise): a loss that does not move at all (lr 0, a zeroed loss) fails whatever the source does. The target optimizer must
hold every parameter that gets a gradient (an optimizer that skips a group is named with the group).
The target optimizer's first step must move the weights by about lr, as an Adam step does (``_update_size.py``: the
median over parameter tensors of |Δθ| / lr, weight decay taken out, at least 0.5; Adam-family optimizers only): both
sides use the delivered optimizer settings, so an epsilon that swamps the gradients is seen by no comparison.

``--real-weights``: instead of the shared random init, the source's own checkpoint cut to the layers
``shrink_config`` keeps (``--shrink-layers`` per tower, one layer of each kind): the source class's
``from_pretrained`` on the source folder with the config cut to the first layers up to the last kept one reads the
real safetensors shards (the index names which shard holds each tensor; the layers past those are never loaded), the
kept layers are taken from them by their old places, and EVERY parameter of the cut model must come from the
shards — a key the checkpoint lacks would be re-initialised, and the probe fails naming it. The plugin gets the same
state dict, as above.

``--ranks N`` (N > 1): the same check with the migrated model sharded over N ranks (``_ranks.launch_ranks``: the
probe re-runs itself under torchrun, gloo on CPU). Each rank draws its own micro batches from the target's
dataloader over the N-rank data-parallel group, the plugin is wrapped by the target's own ``ParallelApplier`` (FSDP2,
mixed precision set to fp32 on every side), each step's loss is the engine's mean over the ranks and the grad norm
the sharded one. The source stays ONE process: each step it trains on the N ranks' micro batches of that step
together, each loss divided by ``N × gradient_accumulation_steps`` — the mean FSDP's gradient reduction computes.
The phases run one after the other (``on_ranks``), so no process holds both models' training state: this process
writes the initial weights, the ranks train the plugin from them and rank 0 writes the target's record (losses,
norms, the step-1 gradients read whole, every rank's micro batches), and only after the ranks have ended does this
process train the source from the same initial weights (loaded strict) on those batches. A rank holds its shard of
the plugin and of its optimizer state, never the source; the source's reference is computed once, not per rank.
Same tolerances: the reduction adds one more summation order (gloo's), ~1e-7 relative in fp32. (Gloo in torch 2.7
sums where FSDP2 asks for the mean; the launcher's CPU patches, applied to the ranks here as to every CPU launch, make
it average: ``cpu_shim.gloo_averages``. "CPU" means no accelerator available at run time, not a CPU build of torch:
the real MindSpeed-MM runtime's CUDA wheel names cuda as its accelerator on a host without a GPU
(``cpu_shim.accelerator_present``). A gradient N× the source's in every group is named as such a reduction.)
"""
import contextlib
import copy
import os
import sys
import tempfile
import time

from _model_build import add_source_args, emit, forward_params, shrink_config
from _meta_init import build
from _dtypes import cast_problem, dtype_differences
from _precision import TORCH_DTYPE, TOLERANCES, bf16_compute, cast_inputs, torch_dtype
from _source_step import load_step
from _update_size import problem as update_problem
from _training_verdict import (GRAD_NORM_RTOL, GRAD_RTOL, LEARN_FLOOR, LEARN_FRACTION, LOSS_RTOL, grad_parity, group_of,
                               verdict)

PRECISION = {"fp32": "fp32 weights, compute, gradients and optimizer on both sides",
             "bf16": "both sides as FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) trains: bf16 "
                     "compute on a copy of fp32 master weights, gradients accumulated and clipped in fp32, AdamW on "
                     "the fp32 weights"}
# what the N-rank phases hand each other in their scratch folder (``on_ranks``)
INITIAL, TARGET_RECORD, TARGET_GRADS = "initial_weights.pt", "target_record.pt", "target_step1_grads.pt"


def parse(argv):
    import argparse

    ap = argparse.ArgumentParser()
    add_source_args(ap)
    ap.add_argument("--config", required=True, help="the delivered training YAML")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--shrink-layers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--media-token-id", type=int)
    ap.add_argument("--source-step", help="FILE.py:function or module:function, the user's source training step: "
                                          "function(model, batch) -> loss, or the whole loop (see the module doc)")
    ap.add_argument("--source-training", help="the plan's source training facts (JSON): its own loss path")
    ap.add_argument("--real-weights", action="store_true",
                    help="start from the source's own checkpoint cut to --shrink-layers layers per tower")
    ap.add_argument("--learn-fraction", type=float, default=LEARN_FRACTION)
    ap.add_argument("--dtype", choices=sorted(TOLERANCES), default="fp32",
                    help="compute dtype of both sides: bf16 as the delivered FSDP2 plan on NPU (_precision.py)")
    ap.add_argument("--ranks", type=int, default=1, help="ranks the migrated model is sharded over (torchrun)")
    ap.add_argument("--rank-timeout", type=int, default=540, help="seconds the --ranks ranks may take")
    ap.add_argument("--as-rank", action="store_true", help=argparse_suppress())
    ap.add_argument("--handoff", help=argparse_suppress())  # the N-rank phases' scratch folder
    ap.add_argument("--attention-used", help=argparse_suppress())  # the attention path phase 1 built with
    return ap.parse_args(argv)


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS  # set by the torchrun relaunch itself


def settings_from(cfg):
    t = cfg.training
    return {"lr": float(t.lr), "weight_decay": float(getattr(t, "weight_decay", 0.0) or 0.0),
            "betas": (float(getattr(t, "adam_beta1", 0.9)), float(getattr(t, "adam_beta2", 0.999))),
            "eps": float(getattr(t, "adam_eps", 1e-8)), "clip_grad": float(getattr(t, "clip_grad", 0.0) or 0.0),
            "gradient_accumulation_steps": int(getattr(t, "gradient_accumulation_steps", 1) or 1),
            "micro_batch_size": int(getattr(t, "micro_batch_size", 1) or 1),
            "schedule_set_aside": {k: getattr(t, k, None) for k in ("lr_warmup_ratio", "lr_decay_style", "lr_min")}}


def engine_batch(batch):
    """What the engine's ``move_to_device`` keeps (top-level tensors, lists of tensors, scalars), floats in fp32."""
    import torch

    out = {}
    for key, value in dict(batch).items():
        if isinstance(value, torch.Tensor):
            out[key] = value.float() if value.is_floating_point() else value
        elif isinstance(value, list) and all(isinstance(v, torch.Tensor) for v in value):
            out[key] = list(value)
        elif value is None or isinstance(value, (bool, int, float, str)):
            out[key] = value
    return out


def loader_settings(cfg):
    """The YAML's dataloader settings as the trainer reads them (its scalar entries), for a finding about the draw."""
    param = cfg.data.dataloader_param
    param = param.to_dict() if hasattr(param, "to_dict") else dict(param)
    return {k: v for k, v in param.items() if isinstance(v, (str, int, float, bool))}


def micro_batches(cfg, dataset, collate_fn, model, count):
    """``count`` micro batches in the order the target's dataloader draws them (its batch sampler, cycled when the
    dataset is short), collated by its collator."""
    from mindspeed_mm.fsdp.data import build_mm_dataloader
    from mindspeed_mm.fsdp.distributed.parallel_state import get_parallel_state

    param = cfg.data.dataloader_param
    param = {**(param.to_dict() if hasattr(param, "to_dict") else dict(param)),
             "batch_size": int(getattr(cfg.training, "micro_batch_size", 1) or 1),
             "seed": getattr(cfg.training, "seed", 1024)}
    loader = build_mm_dataloader(dataset, param, process_group=get_parallel_state().get_dp_group(),
                                 dataset_param=cfg.data.dataset_param, model=model)
    # the loader's own sampler order and collator, in this process: iterating the loader would start its workers
    # (the real one pins memory through CUDA there), which a CPU probe has no use for
    collate = getattr(loader, "collate_fn", None) or collate_fn
    out = []
    while len(out) < count:
        before = len(out)
        for indices in loader.batch_sampler:
            out.append(engine_batch(collate([dataset[i] for i in indices])))
            if len(out) == count:
                break
        if len(out) == before:
            raise RuntimeError("the target's dataloader yields no batch")
    return out


def fixed_loss(model, batch, loss_func=None, dtype="fp32", loss_of=None):
    """The model's loss on ``batch`` without a gradient: its ``.loss`` (with ``loss_func`` as its loss function), or
    ``loss_of(model, batch)`` (a source's own loss path: its training code, the user's step)."""
    import torch

    if loss_func is not None:
        model.loss_function = loss_func
    with torch.no_grad(), bf16_compute(model, dtype):
        batch = compute_batch(batch, dtype)
        loss = loss_of(model, batch) if loss_of is not None else model(**batch, use_cache=False).loss
        return float(loss.detach().float())


def compute_batch(batch, dtype):
    return batch if dtype == "fp32" else cast_inputs(batch, torch_dtype(dtype))


def use_dtype(name):
    """The tolerances of the compute dtype (``_precision.TOLERANCES``): the probe runs one dtype per process, so
    the module's constants, which every check reads, are set once here."""
    global LOSS_RTOL, GRAD_NORM_RTOL, GRAD_RTOL, LEARN_FLOOR
    tol = TOLERANCES[name]
    LOSS_RTOL, GRAD_NORM_RTOL, GRAD_RTOL, LEARN_FLOOR = (tol["loss_rtol"], tol["grad_norm_rtol"], tol["grad_rtol"],
                                                        tol["learn_floor"])


def train(model, batches, settings, optimizer, loss_func_for=None, forward_keys=None, over_ranks=False,
          loss_of=None, first_grads=None, dtype="fp32", first_update=None):
    """The engine's step, K times: per micro batch ``loss / ga`` backward; clip over parameters with a gradient;
    optimizer step at a constant lr. Returns per-step records; the first carries ``grads`` (a copy, before
    clipping), or, with ``first_grads``, the names of the parameters with a gradient (``grad_names``) and what
    ``first_grads(pairs)`` returns (``first_grads``) for the (name, whole gradient) pairs read one at a time before
    clipping: a consumer that compares or writes them needs no second copy of every gradient.
    ``over_ranks``: the model is sharded over the process group (every rank calls this): the logged loss is the mean
    over the ranks, gradients and the norm are read whole. ``loss_of(model, batch)``: another loss path than
    ``model(**batch).loss`` (the source's own training code). ``dtype``: the compute dtype of each micro batch's
    forward and backward (``_precision.bf16_compute``: fp32 master weights, gradients and optimizer).
    ``first_update``: a dict filled with the first step's size against lr (``_update_size.first_step``)."""
    import torch
    from _ranks import full, mean_over_ranks
    from _update_size import first_step, snapshot

    ga, clip = settings["gradient_accumulation_steps"], settings["clip_grad"]
    records = []
    for step in range(len(batches) // ga):
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for batch in batches[step * ga:(step + 1) * ga]:
            if forward_keys is not None:
                batch = {k: v for k, v in batch.items() if k in forward_keys}
            if loss_func_for is not None:
                func = loss_func_for(batch)
                if func is not None:
                    model.loss_function = func
            with bf16_compute(model, dtype):
                batch = compute_batch(batch, dtype)
                loss = (loss_of(model, batch) if loss_of is not None else model(**batch, use_cache=False).loss) / ga
                loss.backward()
            total += float(loss.detach().float())
        params = [p for p in model.parameters() if p.grad is not None]
        record = {"loss": mean_over_ranks(total) if over_ranks else total}
        if step == 0 and first_grads is None:
            record["grads"] = {n: full(p.grad.detach()).clone() for n, p in model.named_parameters()
                               if p.grad is not None}
        elif step == 0:
            graded = [(n, p) for n, p in model.named_parameters() if p.grad is not None]
            record["grad_names"] = [n for n, _ in graded]
            # a collective per sharded gradient: every rank consumes the pairs in the same order
            record["first_grads"] = first_grads((n, full(p.grad.detach())) for n, p in graded)
        norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf")) if params else None
        record["grad_norm"] = float(full(norm)) if norm is not None else 0.0
        snap = snapshot(params, full) if step == 0 and first_update is not None else None
        optimizer.step()
        if snap is not None:
            first_update.update(first_step(optimizer, snap, full))
            del snap
        records.append(record)
    return records


def plain_adamw(model, settings):
    import torch

    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=settings["lr"],
                             betas=settings["betas"], eps=settings["eps"], weight_decay=settings["weight_decay"])


def target_optimizer(cfg, model):
    """The optimizer the target's trainer builds for this config (its ``Trainer.get_optimizer``), at a constant lr;
    fused kernels off (CPU)."""
    from types import SimpleNamespace

    from mindspeed_mm.fsdp.train.trainer import Trainer

    if hasattr(cfg.training, "adam_fused"):
        cfg.training.adam_fused = False
    return Trainer.get_optimizer(SimpleNamespace(args=cfg, model=model))


def shard(cfg, model, dtype="fp32"):
    """The plugin wrapped the way the target's trainer wraps it (``Trainer.get_model`` after the build: its
    ``ParallelApplier``, FSDP2 over the data-parallel ranks), mixed precision set so both sides compute alike: all
    fp32, or (``dtype`` bf16) FSDP2's own bf16 compute with fp32 reduction, as the delivered plan runs on NPU."""
    from mindspeed_mm.fsdp.distributed.torch_parallelize import ParallelApplier

    plan = cfg.parallel.fsdp_plan
    for key in ("param_dtype", "reduce_dtype", "output_dtype"):
        if getattr(plan, key, None) is not None or (key == "param_dtype" and dtype != "fp32"):
            setattr(plan, key, dtype if key == "param_dtype" else "fp32")
    return ParallelApplier(cfg.parallel, cfg.training)(model)


def source_batches(per_rank, ga):
    """One process's micro batches for the N ranks' steps: step s takes every rank's micro batches of step s."""
    steps = min(len(b) for b in per_rank) // ga
    return [b for s in range(steps) for rank in per_rank for b in rank[s * ga:(s + 1) * ga]]


def on_ranks(argv, args):
    """The N-rank check in three phases, so that no process holds both models' training state (a real-scale model
    on every rank next to its sharded copy is what the host's memory cannot take): (1) this process builds the shared
    initial weights as one process would, writes them to a scratch folder and frees them; (2) the ranks load them
    into the plugin, shard and train it, and rank 0 writes the target's record there (losses, norms, the step-1
    gradients read whole, every rank's micro batches), then the ranks end; (3) this process loads the same initial
    weights (strict) into the source and trains it on those micro batches, its step-1 gradients compared as they
    are computed. The comparison is the one-process check's, term for term."""
    import gc

    from _ranks import launch_ranks

    start = time.monotonic()
    launch = None
    try:
        import torch

        opened = open_sides(args, start)
        if opened is None:
            return 0
        src_cls, src_cfg, params, takes_kwargs, plg_cls, plg_cfg = opened
        with tempfile.TemporaryDirectory(prefix="msmigrate-parity-") as scratch:
            initial = os.path.join(scratch, INITIAL)
            source, plugin, attention, weights, problem, cast = initial_pair(args, src_cls, src_cfg, plg_cls,
                                                                             plg_cfg)
            if problem:
                emit({"passed": False, "problems": [problem]})
                return 0
            torch.save(source.state_dict(), initial)
            del source, plugin
            gc.collect()
            rank_argv = [*argv, "--handoff", scratch] + (["--attention-used", attention] if attention else [])
            out, cmd, rc, err = launch_ranks(__file__, rank_argv, args.ranks, args.rank_timeout)
            launch = {"argv": cmd, "returncode": rc, "nproc": args.ranks}
            if out is None:
                from _ranks import killed_by_sigkill

                killed = killed_by_sigkill(err)  # leads the error: the report cuts it, and the table comes last
                lead = (f"rank(s) {', '.join(map(str, killed))} killed by SIGKILL (the out-of-memory killer where the "
                        "host sets no other limit); " if killed else "")
                emit({"error": f"the {args.ranks}-rank run gave no result (torchrun exit {rc}): {lead}{err[-1500:]}",
                      "launch": cmd})
                return 1
            if rc != 0 or not out.get("handoff"):  # the ranks' own verdict or error, handed on
                out["launch"] = launch
                if rc != 0 and not out.get("error"):
                    out["error"] = f"torchrun exited {rc} after the result: {err[-800:]}"
                emit(out)
                return 0 if rc == 0 and not out.get("error") else 1
            tgt = torch.load(os.path.join(scratch, TARGET_RECORD), weights_only=False)
            tgt["cast"] = cast
            target_grads = torch.load(os.path.join(scratch, TARGET_GRADS), mmap=True, weights_only=True)

            def fresh_source():  # the source at the weights the ranks started from, not a rebuild assumed equal
                torch.manual_seed(args.seed)
                model = build(src_cls, src_cfg)
                model.load_state_dict(torch.load(initial, mmap=True, weights_only=True), strict=True)
                return ready(model, args)

            # the user's step takes the whole micro batch (labels too) and feeds its forward itself
            src_keys = None if takes_kwargs or args.step else set(params)
            with as_the_source(args):
                source = fresh_source()
                why_not, source_before = source_precheck(source, tgt["per_rank"][0][0], src_keys, args.dtype,
                                                         args.step)
            if why_not:  # G1 says the same through its own probe; nothing to train side by side
                emit({"source_class": class_name(src_cls), "passed": None, "why_not": why_not[:600], "problems": [],
                      "launch": launch, "seconds": round(time.monotonic() - start, 2)})
                return 0
            held = [source]
            del source
            with as_the_source(args):
                found = source_side(args, held.pop, fresh_source, tgt, target_grads, tgt["settings"], src_keys,
                                    args.ranks, source_before)
            del target_grads
    except Exception as exc:  # probe boundary: the failure is the result
        import traceback

        traceback.print_exc()
        emit({"error": f"{type(exc).__name__}: {exc}", **({"launch": launch} if launch else {})})
        return 1
    out = result(args, start, src_cls, tgt["plugin_class"], tgt, tgt["settings"], *found, attention, weights,
                 args.ranks)
    out["launch"] = launch
    emit(out)
    return 0


def as_rank(args):
    """One rank of the N-rank check (``on_ranks``, phase 2): the plugin at the initial weights phase 1 wrote,
    sharded by the target's applier and trained on this rank's share; rank 0 writes the target's record."""
    from _ranks import world
    from data_check import load_pipeline

    try:
        import torch

        open_probe(args)
        plg_cls, plg_cfg = plugin_config(args)  # joins torchrun's group
        rank = world()[0]
        cfg, dataset, collate_fn = load_pipeline(args.config)
        settings = settings_from(cfg)
        if args.attention_used:
            plg_cfg._attn_implementation = args.attention_used
        torch.manual_seed(args.seed)
        plugin = build(plg_cls, plg_cfg)
        state = torch.load(os.path.join(args.handoff, INITIAL), mmap=True, weights_only=True)
        missing, unexpected = plugin.load_state_dict(state, strict=False)
        del state
        if missing or unexpected:  # phase 1 loaded the same weights into the same class: a bug, not a finding
            raise RuntimeError(f"the initial weights do not fit the plugin on rank {rank}: missing "
                               f"{list(missing)[:5]}, unexpected {list(unexpected)[:5]}")

        def keep_on_rank_0(grads):  # every rank reads each gradient whole (a collective); rank 0 writes them
            if rank == 0:
                torch.save(dict(grads), os.path.join(args.handoff, TARGET_GRADS))
            else:
                for _ in grads:
                    pass

        tgt = target_side(args, cfg, dataset, collate_fn, settings, plugin, keep_on_rank_0)
        del plugin
        if rank == 0:
            torch.save({**tgt, "settings": settings, "plugin_class": class_name(plg_cls)},
                       os.path.join(args.handoff, TARGET_RECORD))
            emit({"handoff": True})
    except Exception as exc:  # probe boundary: the failure is the result
        import traceback

        traceback.print_exc()
        say({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    return 0


def own_loss_of(facts, source_dir):
    """The source's own loss path on a target micro batch (labels aligned with the ids, as the target feeds them),
    the labels put back into the source's convention first: pre-shifted sources read label i as token i+1."""
    import torch
    from _own_pipeline import IGNORE, own_forward

    def loss_of(model, batch):
        batch = dict(batch)
        labels = batch.get("labels")
        if facts.get("label_convention") == "pre-shifted" and isinstance(labels, torch.Tensor):
            batch["labels"] = torch.cat([labels[..., 1:], torch.full_like(labels[..., :1], IGNORE)], dim=-1)
        return own_forward(model, batch, facts, source_dir)[1]

    return loss_of


def own_training_facts(path):
    """The plan's facts when the source ships training code with a loss path to run, else None."""
    if not path:
        return None
    import json

    with open(path, encoding="utf-8") as fh:
        facts = json.load(fh)
    return facts if facts.get("kind") == "own" else None


def real_weights(src_cls, src_cfg, folder, source, trust_remote_code, full_cfg, layers, attention=None):
    """Load the source's own checkpoint, cut to the shrunk config, into ``source``; -> facts for the record. The
    checkpoint's first layers up to the last kept one are read (``full_cfg``, the source's uncut config, cut with
    ``span=True``) and the kept ones taken from them (``kept_state``): a stack that keeps a later layer of another
    kind (a full-attention layer among sliding ones) gets that layer's own tensors. Raises where a parameter of the
    cut model is not in the checkpoint (it would be re-initialised). ``attention``: the implementation the pair was
    built with, which the checkpoint's model is loaded with too."""
    import json

    import torch
    from _model_build import kept_state

    shards = sorted(n for n in os.listdir(folder) if n.endswith(".safetensors"))
    if not shards:
        raise FileNotFoundError(f"no safetensors shards in {folder}: no real weights to start from")
    span_cfg = shrink_config(full_cfg, layers, span=True)
    if attention:  # the path the pair was built with (eager where the source class has no SDPA path): like with like
        span_cfg._attn_implementation = attention
    real, info = src_cls.from_pretrained(folder, config=span_cfg, torch_dtype=torch.float32, output_loading_info=True,
                                         trust_remote_code=trust_remote_code)
    missing = [k for k in info.get("missing_keys", []) if k in dict(real.named_parameters())]
    if missing or info.get("mismatched_keys"):
        raise KeyError(f"the cut model's parameters are not all in the checkpoint (they would be re-initialised): "
                       f"missing {missing[:5]}, mismatched {list(info.get('mismatched_keys') or [])[:3]}")
    state = kept_state(real.state_dict(), source, getattr(src_cfg, "_msmigrate_kept", {}))
    source.load_state_dict(state, strict=True)
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as fh:
            weight_map = json.load(fh)["weight_map"]
        files, in_checkpoint = sorted(set(weight_map.values())), len(weight_map)
    else:
        from safetensors import safe_open

        files, in_checkpoint = shards, 0
        for name in shards:
            with safe_open(os.path.join(folder, name), framework="pt") as fh:
                in_checkpoint += len(list(fh.keys()))
    # the checkpoint's tensors past the cut (deeper layers) are left in the shards
    kept = {k: v for k, v in getattr(src_cfg, "_msmigrate_kept", {}).items() if v != list(range(len(v)))}
    return {"folder": folder, "shards": files, "tensors_loaded": len(state), "checkpoint_tensors": in_checkpoint,
            "kept_layers": kept}  # the stacks whose kept layers are not their first ones


def shifted_once_more(batch):
    import torch

    labels = batch.get("labels")
    if not isinstance(labels, torch.Tensor) or labels.dim() != 2:
        return None
    pad = torch.full_like(labels[:, :1], -100)
    return {**batch, "labels": torch.cat([labels[:, 1:], pad], dim=1)}


def loss_cause(source, batches, src_loss, tgt_loss, dtype="fp32", loss_of=None, user_step=None):
    """Why the step-1 losses (mean over the step's micro batches, at the initial weights) differ, where one
    explanation fits within the tolerance: labels shifted one more time, or a constant loss scale. ``loss_of``: the
    source's loss path where it is not ``.loss``; ``user_step``: the user's step it is (named in the cause)."""
    shifted = [shifted_once_more(b) for b in batches]
    if shifted and all(b is not None for b in shifted):
        twice = sum(fixed_loss(source, b, dtype=dtype, loss_of=loss_of) for b in shifted) / len(shifted)
        if abs(twice - tgt_loss) <= LOSS_RTOL * max(1.0, abs(tgt_loss)):
            if user_step:
                return (f"labels are shifted once more in the migrated model than in the user's step {user_step}: "
                        f"the migrated loss {tgt_loss:.6g} equals that step's loss with the labels moved one more "
                        f"position ({twice:.6g}) — a step that does not shift its labels (logits at t score token "
                        "t+1), or a migration that shifts them twice")
            return (f"labels are shifted twice: the migrated loss {tgt_loss:.6g} equals the source's loss with the "
                    f"labels moved one more position ({twice:.6g})")
    if src_loss:
        ratio = tgt_loss / src_loss
        if abs(ratio - 1) > LOSS_RTOL:
            return f"the migrated loss is {ratio:.4g}× the source's (a loss scale or another loss)"
    return None


def build_pair(src_cls, src_cfg, plg_cls, plg_cfg, seed, attention):
    """The source and the plugin from one seed. A source class without the requested attention path (remote code
    with no SDPA, e.g. InternVisionModel) raises a ValueError naming the attention implementation at build: as in
    ``model_parity``, both sides are then built eager, like with like, and the parity runs. -> (source, plugin,
    the attention implementation used)."""
    import torch

    try:
        torch.manual_seed(seed)
        pair = build(src_cls, src_cfg), build(plg_cls, plg_cfg)
        # ``build`` itself falls back to eager where a class has no path for the asked one: then the configs (which
        # ``real_weights`` loads the checkpoint with) and the other side must follow, like with like
        used = {getattr(m.config, "_attn_implementation", attention) for m in pair}
        if attention in (None, "eager") or used == {attention}:
            return (*pair, attention)
    except ValueError as exc:
        if "attention implementation" not in str(exc) and "attn_implementation" not in str(exc):
            raise
    for cfg in (src_cfg, plg_cfg):
        cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    return build(src_cls, src_cfg), build(plg_cls, plg_cfg), "eager"


def say(payload):
    """The result line, from rank 0 only (the other ranks of a ``--ranks`` run only take part)."""
    from _ranks import world

    if world()[0] == 0:
        emit(payload)


def open_probe(args):
    """The setup every side shares: the target root importable, the source class and its config (shrunk, no
    dropout). -> (src_cls, src_cfg, forward params, takes **kwargs)."""
    import torch

    target = os.path.abspath(args.target)
    os.environ.setdefault("NON_MEGATRON", "true")
    os.chdir(target)
    sys.path.insert(0, target)
    torch.use_deterministic_algorithms(True, warn_only=True)
    from model_parity import no_dropout, source_class

    src_cls, src_cfg = source_class(args)
    params, takes_kwargs = forward_params(src_cls)
    shrink_config(src_cfg, args.shrink_layers)
    no_dropout(src_cfg)
    return src_cls, src_cfg, params, takes_kwargs


def open_sides(args, start):
    """``open_probe`` and ``plugin_config``: (src_cls, src_cfg, forward params, takes **kwargs, plg_cls, plg_cfg);
    None, the result said, where the source's forward takes no labels and no source step is plugged in (nothing to
    train side by side). Sets ``args.step``: the user's (function, form), or None."""
    args.step = load_step(args.source_step) if args.source_step else None
    src_cls, src_cfg, params, takes_kwargs = open_probe(args)
    if "labels" not in params and not takes_kwargs and args.step is None:
        emit(no_labels(src_cls, start))
        return None
    args.before_import = source_code_before(src_cls, src_cfg)
    return (src_cls, src_cfg, params, takes_kwargs, *plugin_config(args))


def source_code_before(src_cls, src_cfg):
    """The callables the source's model runs through, before the plugin package is imported (``_import_effects``):
    read from a copy built on meta (no weights), so that the source's side can run without what the plugin's import
    patches into them (a fused kernel whose backward differs would otherwise be on both sides of the comparison)."""
    from _import_effects import snapshot
    from _model_build import instantiate

    try:
        return snapshot(instantiate(src_cls, copy.deepcopy(src_cfg), meta=True))
    except Exception as exc:  # probe boundary: a class that will not build on meta; the guard is then not examined
        print(f"the source's code before the plugin import not read ({type(exc).__name__}: {exc}); its side runs "
              "with whatever the plugin's import patched", file=sys.stderr)
        return None


@contextlib.contextmanager
def as_the_source(args):
    """The source's own code while inside (``_import_effects.unpatched``); what was put back, with where the
    plugin's replacement is defined, is kept in ``args.unpatched`` for the result."""
    from _import_effects import changed, unpatched

    before = getattr(args, "before_import", None)
    # None: the code before the import was not read (the record says so); [] : read, and nothing was patched
    args.unpatched = None if before is None and hasattr(args, "before_import") else [
        f"{c['name']}" + (f" (by {c['now_from']})" if c.get("now_from") else "")
        for c in changed(before or {}, getattr(args, "target", None))]
    before = before or {}
    with unpatched(before):
        yield


def no_labels(src_cls, start):
    return {"source_class": f"{src_cls.__module__}.{src_cls.__qualname__}", "passed": None,
            "why_not": "the source's own forward takes no labels: its loss cannot be computed on the target "
                       "pipeline's batches (a source training step must be plugged in: --source-step)",
            "problems": [], "seconds": round(time.monotonic() - start, 2)}


def plugin_config(args):
    """The plugin class and its config, shrunk like the source's (imports the plugins and sets up the single rank,
    or joins torchrun's)."""
    from model_parity import no_dropout, plugin_class

    plg_cls, plg_cfg = plugin_class(args)
    shrink_config(plg_cfg, args.shrink_layers)
    no_dropout(plg_cfg)
    return plg_cls, plg_cfg


def initial_pair(args, src_cls, src_cfg, plg_cls, plg_cfg):
    """The source and the plugin at the shared initial weights (one seed, or the source's checkpoint cut): -> (source,
    plugin, attention used, weights record, problem or None, the plugin's own dtype cast or None)."""
    source, plugin, attention = build_pair(src_cls, src_cfg, plg_cls, plg_cfg, args.seed, args.attn_implementation)
    weights = "shared random init (seed {})".format(args.seed)
    if args.real_weights:
        from model_parity import source_class

        weights = real_weights(src_cls, src_cfg, os.path.abspath(args.model), source, args.trust_remote_code,
                               source_class(args)[1], args.shrink_layers, attention)
    missing, unexpected = plugin.load_state_dict(source.state_dict(), strict=False)
    problem = (f"the plugin's parameters are not the source's: missing {list(missing)[:5]}, unexpected "
               f"{list(unexpected)[:5]}") if missing or unexpected else None
    # a part the plugin's own code casts, seen through both sides' fp32 build (``_dtypes``): reported, not trained
    # away by the comparison in fp32
    cast = cast_problem(plugin, plg_cls, dtype_differences(source, plugin), args.target)
    return source, plugin, attention, weights, problem, cast


def target_side(args, cfg, dataset, collate_fn, settings, plugin, grads_sink, precheck=None):
    """The migrated model's K steps in the target trainer's step (on this rank's share where sharded): -> the
    record the source side is compared with (losses, norms, fixed-batch losses, optimizer facts, every rank's micro
    batches), or ``{"why_not": ...}`` where ``precheck(fixed batch)`` says the source cannot run on them.
    ``grads_sink``: consumes the step-1 gradients, read whole, before clipping (``train``'s ``first_grads``)."""
    from _ranks import gather, world
    from sharded_reference import engine_loss_func

    nproc = world()[1]
    ready(plugin, args)
    # sharded, FSDP2's mixed precision computes in the dtype (``shard``); one process, ``bf16_compute`` does
    dtype = args.dtype if nproc == 1 else "fp32"
    if nproc > 1:
        plugin = shard(cfg, plugin, args.dtype)
    # the trainer's order: the optimizer right after wrapping, before any forward. FSDP2 leaves the root
    # module's parameters unsharded after a forward without backward (it expects the backward next), so an
    # optimizer built after the fixed-batch forward below would hold those transient unsharded tensors and
    # leave the root's real (sharded) parameters out of every group
    tgt_opt = target_optimizer(cfg, plugin)
    held = {id(p) for group in tgt_opt.param_groups for p in group["params"]}
    ga = settings["gradient_accumulation_steps"]
    batches = micro_batches(cfg, dataset, collate_fn, plugin, args.steps * ga)  # this rank's share
    per_rank = gather(batches)
    fixed = per_rank[0][0]  # one fixed batch on every rank
    why_not = precheck(fixed) if precheck is not None else None
    if why_not:
        return {"why_not": why_not}
    loss_func_for = lambda b: engine_loss_func(cfg, b)  # noqa: E731  (the engine sets it per batch)
    fixed_before = fixed_loss(plugin, fixed, loss_func_for(fixed), dtype)
    opt_groups = [{"params": len(g["params"]), "weight_decay": g.get("weight_decay"), "lr": g.get("lr")}
                  for g in tgt_opt.param_groups]
    first_update: dict = {}
    recs = train(plugin, batches, settings, tgt_opt, loss_func_for, over_ranks=nproc > 1, first_grads=grads_sink,
                 dtype=dtype, first_update=first_update)
    graded = set(recs[0]["grad_names"]) if recs else set()
    unheld = [n for n, p in plugin.named_parameters() if n in graded and id(p) not in held]
    stale = len(held - {id(p) for p in plugin.parameters()})  # held tensors that are not the model's now
    fixed_after = fixed_loss(plugin, fixed, loss_func_for(fixed), dtype)
    return {"recs": [{k: r[k] for k in ("loss", "grad_norm")} for r in recs], "per_rank": per_rank,
            "samples": len(dataset), "dataloader": loader_settings(cfg),
            "fixed_before": fixed_before, "fixed_after": fixed_after, "unheld": unheld, "stale": stale,
            "optimizer": type(tgt_opt).__name__, "param_groups": opt_groups, "first_update": first_update}


def source_fixed(fixed, src_keys):
    """The fixed batch as the source's forward takes it."""
    return {k: v for k, v in fixed.items() if src_keys is None or k in src_keys}


def source_precheck(source, fixed, src_keys, dtype="fp32", step=None):
    """(why the source cannot train on the target pipeline's batches — None: it can —, the source's loss on the
    fixed batch at the initial weights). ``step``: the user's (function, form): its loss form is the source's loss
    on the whole batch; a loop gives no loss of one batch (nothing to check before it runs)."""
    from model_parity import required_params

    if step is not None:
        fn, form = step
        if form == "loop":
            return None, None
        try:
            return None, fixed_loss(source, fixed, dtype=dtype, loss_of=fn)
        except Exception as exc:  # probe boundary: the user's step does not run on the target's batch
            return (f"the user's source step fails on the target pipeline's batch: {type(exc).__name__}: {exc}",
                    None)
    first = source_fixed(fixed, src_keys)
    unfed = required_params(type(source), first)
    if unfed:
        return f"the source's own forward requires {unfed}, which the target pipeline's batch does not carry", None
    try:
        return None, fixed_loss(source, first, dtype=dtype)
    except Exception as exc:  # probe boundary: the target's batch is not the source's own input format
        return f"the source's own forward fails on the target pipeline's batch: {type(exc).__name__}: {exc}", None


def source_side(args, take_source, fresh_source, tgt, target_grads, settings, src_keys, nproc, fixed_before):
    """The source's K steps on every rank's micro batches of each step (one process; ``take_source()`` hands the
    model over, the caller keeping no reference, so it can be freed for a fresh copy), its step-1 gradients compared
    with ``target_grads`` as they are computed (no copy of them kept), and the cause of a step-1 loss difference
    from ``fresh_source()`` (the source at the initial weights); ``fixed_before``: the source's loss on the fixed
    batch before its steps. -> (source records, gradient groups, source step description, first-loss cause, the
    source's own fixed-batch fall)."""
    source = take_source()
    ga = settings["gradient_accumulation_steps"]
    src_batches = source_batches(tgt["per_rank"], ga)
    src_settings = {**settings, "gradient_accumulation_steps": ga * nproc}
    source_names = [n for n, _ in source.named_parameters()]
    compare = lambda grads: grad_parity(dict(grads), target_grads, source_names)  # noqa: E731
    own = own_training_facts(args.source_training)
    step_fn, form = args.step or (None, None)
    loss_of = None
    if form == "loop":
        source_recs = step_fn(source, src_batches, src_settings)
        source_step = f"the user's step {args.source_step} (its own loop and optimizer)"
        groups = (grad_parity(source_recs[0].pop("grads"), target_grads, source_names)
                  if source_recs and "grads" in source_recs[0] else [])
    else:
        loss_of = step_fn if form == "loss" else (
            own_loss_of(own, os.path.abspath(args.model)) if own is not None else None)
        source_recs = train(source, src_batches, src_settings, plain_adamw(source, src_settings), None, src_keys,
                            loss_of=loss_of, first_grads=compare, dtype=args.dtype)
        groups = source_recs[0].get("first_grads") or [] if source_recs else []
        if form == "loss":
            source_step = (f"the user's step {args.source_step}: its loss on each micro batch (labels as the target "
                           "feeds them) + torch.optim.AdamW")
        elif own is not None:
            trainer = own.get("trainer") or {}
            source_step = ("the source's own training code: " + (
                f"{trainer.get('file')}:{trainer.get('class')}.compute_loss" if trainer.get("computes_loss")
                else "the model's .loss as its HF Trainer calls it") +
                f" (labels {own.get('label_convention') or 'as the target feeds them'}) + torch.optim.AdamW")
        else:
            source_step = "HF class loss + torch.optim.AdamW (no source training code plugged in)"
    source_fall = None
    try:  # the source's own fall on the fixed batch: the learning check's judge where the target falls little
        if form != "loop":  # a loop gives no loss of one batch
            after = fixed_loss(source, source_fixed(tgt["per_rank"][0][0], src_keys), dtype=args.dtype,
                               loss_of=loss_of if form == "loss" else None)
            source_fall = (fixed_before - after) / abs(fixed_before) if fixed_before else None
    except Exception as exc:  # probe boundary: recorded, the check then asks the stated fraction alone
        print(f"source fixed-batch loss after training: {type(exc).__name__}: {exc}", file=sys.stderr)
    cause = None
    s0, t0 = source_recs[0]["loss"], tgt["recs"][0]["loss"]
    if form != "loop" and abs(s0 - t0) > LOSS_RTOL * max(1.0, abs(s0)):  # a loop gives no loss of one batch
        # a fresh source copy at the initial weights explains the difference (the trained one has moved)
        del source  # memory for the fresh copy
        fresh = fresh_source()
        first = [source_fixed(b, src_keys) for b in src_batches[:ga * nproc]]
        user = form == "loss"  # the user's loss form is the source's loss path, and is named in the cause
        cause = loss_cause(fresh, first, s0, t0, args.dtype, loss_of=loss_of if user else None,
                           user_step=args.source_step if user else None)
    return source_recs, groups, source_step, cause, source_fall


def result(args, start, src_cls, plg_name, tgt, settings, source_recs, groups, source_step, cause, source_fall,
           attention, weights, nproc):
    """The probe's result line: the verdict over both sides' records."""
    target_recs = tgt["recs"]
    problems = verdict(source_recs, target_recs, groups, tgt["fixed_before"], tgt["fixed_after"],
                       args.learn_fraction, cause, nproc, source_fall)
    unheld, stale = tgt["unheld"], tgt["stale"]
    if unheld:
        skipped = sorted({group_of(n) for n in unheld})
        problems.insert(0, f"the target optimizer skips parameter group{'s' * (len(skipped) > 1)} "
                           f"{', '.join(skipped)}: {len(unheld)} parameters get a gradient but are in none of its "
                           f"param groups (e.g. {unheld[0]}), so they never train" + (
                               f"; it holds {stale} tensors that are no longer the model's parameters (built while "
                               "they were swapped, e.g. FSDP2's unsharded copies after a forward?)" if stale else ""))
    if tgt.get("cast"):
        problems.insert(0, tgt["cast"])
    crippled = update_problem(tgt.get("first_update"))
    if crippled:
        problems.append(crippled)
    from _ranks import same_draws

    duplicated = same_draws(tgt.get("per_rank") or [], tgt.get("samples"), tgt.get("dataloader"))
    if duplicated:
        problems.append(duplicated)
    unpatched = getattr(args, "unpatched", [])
    if problems and unpatched:  # the source ran as written; the plugin's side with what its import replaced
        problems.append(f"the plugin's import replaces {', '.join(unpatched[:4])}{' …' if len(unpatched) > 4 else ''}"
                        " in the source's own code: the source side ran without the replacement, the plugin's side "
                        "with it — a difference there is the plugin's")
    if problems and args.source_step:  # the reference is the user's own code: say so beside what differs
        problems.append(f"the source side of this comparison is the user's step {args.source_step}: a difference is a "
                        "fault of the migration or of that step (its loss, its label shift, its scale)")
    before, after = tgt["fixed_before"], tgt["fixed_after"]
    return {"source_class": f"{src_cls.__module__}.{src_cls.__qualname__}", "plugin_class": plg_name,
            "source_step": source_step, "steps": len(target_recs), "settings": settings,
            "target_optimizer": tgt["optimizer"], "target_param_groups": tgt["param_groups"],
            "target_first_update": tgt.get("first_update"),
            "source": {"loss": [r["loss"] for r in source_recs], "grad_norm": [r["grad_norm"] for r in source_recs]},
            "target": {"loss": [r["loss"] for r in target_recs], "grad_norm": [r["grad_norm"] for r in target_recs]},
            "grad_groups": groups, "fixed_batch": {"before": before, "after": after,
                                                   "fall": (before - after) / abs(before) if before else None,
                                                   "source_fall": source_fall},
            "tolerance": {"loss_rtol": LOSS_RTOL, "grad_norm_rtol": GRAD_NORM_RTOL, "grad_rtol": GRAD_RTOL,
                          "learn_fraction": args.learn_fraction, "learn_floor": LEARN_FLOOR,
                          "dtype": TORCH_DTYPE[args.dtype]},
            "first_loss_cause": cause, "source_unpatched": unpatched, "dtype": TORCH_DTYPE[args.dtype],
            "device": "cpu",
            "precision": PRECISION[args.dtype], "attention": attention, "nproc": nproc,
            "weights": weights, "layers_per_tower": args.shrink_layers,
            "sharding": ("the target's ParallelApplier (FSDP2, fp32) over {} gloo ranks; the source one process on "
                         "all ranks' micro batches, after the ranks".format(nproc)) if nproc > 1
            else "none (one process)",
            "passed": not problems, "problems": problems, "seconds": round(time.monotonic() - start, 2)}


def ready(model, args):
    """A model as both sides train it: training mode with inert dropout, the caller-set media token id."""
    from model_parity import caller_set_media_ids, training_mode

    training_mode(model)
    caller_set_media_ids(model, args.media_token_id)
    return model


def class_name(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


def main(argv):
    args = parse(argv)
    use_dtype(args.dtype)
    if args.ranks > 1 and not args.as_rank:
        return on_ranks(argv, args)
    if args.as_rank:
        return as_rank(args)
    start = time.monotonic()
    try:
        import torch
        from data_check import load_pipeline

        opened = open_sides(args, start)
        if opened is None:
            return 0
        src_cls, src_cfg, params, takes_kwargs, plg_cls, plg_cfg = opened
        cfg, dataset, collate_fn = load_pipeline(args.config)
        settings = settings_from(cfg)
        with tempfile.TemporaryDirectory(prefix="msmigrate-parity-") as scratch:
            found = one_process(args, start, scratch, (src_cls, src_cfg, plg_cls, plg_cfg),
                                (cfg, dataset, collate_fn, settings),
                                None if takes_kwargs or args.step else set(params))
        if found is None:
            return 0
        tgt, found, attention, weights = found
    except Exception as exc:  # probe boundary: the failure is the result
        import traceback

        traceback.print_exc()
        emit({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    emit(result(args, start, src_cls, class_name(plg_cls), tgt, settings, *found, attention, weights, 1))
    return 0


def one_process(args, start, scratch, classes, pipeline, src_keys):
    """Both sides in this process, one model's training state at a time: the shared initial weights wait on disk
    (``scratch``) while the target trains, the target's step-1 gradients wait there while the source trains, and
    the source is built from those weights (strict) when its turn comes — at real scale the source model and a copy
    of every gradient beside the target's weights, gradients and Adam state were the largest process of a run.
    ``classes``: (source class, its config, plugin class, its config); ``pipeline``: (delivered config, dataset,
    collate_fn, settings). -> (target record, ``source_side``'s result, attention used, weights record), or None
    where the result is already emitted (a plugin that does not take the source's weights; a source that cannot
    train on the target's batches)."""
    import gc

    import torch

    src_cls, src_cfg, plg_cls, plg_cfg = classes
    cfg, dataset, collate_fn, settings = pipeline
    source, plugin, attention, weights, problem, cast = initial_pair(args, src_cls, src_cfg, plg_cls, plg_cfg)
    if problem:
        emit({"passed": False, "problems": [problem]})
        return None
    initial, grads_file = os.path.join(scratch, INITIAL), os.path.join(scratch, TARGET_GRADS)
    torch.save(source.state_dict(), initial)
    del source
    gc.collect()

    def fresh_source():  # the source at the weights the target started from, read back strictly
        torch.manual_seed(args.seed)
        model = build(src_cls, src_cfg)
        model.load_state_dict(torch.load(initial, mmap=True, weights_only=True), strict=True)
        return ready(model, args)

    checked = {}

    def precheck(fixed):  # a copy of the source for its loss on the fixed batch, freed before the target trains
        with as_the_source(args):
            why_not, checked["before"] = source_precheck(fresh_source(), fixed, src_keys, args.dtype, args.step)
        gc.collect()
        return why_not

    def to_disk(grads):
        torch.save(dict(grads), grads_file)

    tgt = target_side(args, cfg, dataset, collate_fn, settings, plugin, to_disk, precheck=precheck)
    if tgt.get("why_not"):  # G1 says the same through its own probe; nothing to train side by side
        emit({"source_class": class_name(src_cls), "passed": None, "why_not": tgt["why_not"][:600],
              "problems": [], "seconds": round(time.monotonic() - start, 2)})
        return None
    tgt["cast"] = cast
    # the target side is recorded: its model, optimizer state and last gradients go before the source trains
    del plugin
    gc.collect()
    target_grads = torch.load(grads_file, mmap=True, weights_only=True)
    with as_the_source(args):
        found = source_side(args, fresh_source, fresh_source, tgt, target_grads, settings, src_keys, 1,
                            checked["before"])
    del target_grads
    return tgt, found, attention, weights


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
