"""Parity: the migrated model and data must compute what the SOURCE computes, checked against the source's own code
(DESIGN decision 11: the source is the oracle). A finite, falling loss proves none of this — a template that drops the
system turn, labels that train the prompt, an image token too few, a changed ``rms_norm_eps`` or a buffer left
uninitialised after meta init all still train.

Three checks, each part of the gate whose evidence it needs (so no extra launch):

- G1 ``model``: plugin class vs source class, one shared random init, the same batch, fp32 CPU; eager and meta init +
  load (``probes/model_parity.py``). Tolerances: max |Δlogit| ≤ 1e-4, |Δloss| ≤ 1e-5.
- G2 ``data``: the target's mapped samples vs the source's chat template + processor (prompt ids, label mask, media
  token count; ``probes/_data_parity.py``), and the media tokens of the collated batch vs the vision features the
  forward consumes (``probes/forward_smoke.py --media-token-id``).
- G4 ``training``: K optimizer steps (``launch.parity_steps``, default 20) of the source class with its own loss and
  of the plugin in the target trainer's step, same init, batches (the target pipeline's, in its order) and optimizer
  settings (the delivered YAML's, at a constant lr), fp32 CPU (``probes/training_parity.py``): per-step loss
  (|Δ| ≤ 1e-4 · max(1, |loss|)) and global grad norm (1e-3 relative), step-1 gradient per parameter group (every
  parameter the source trains gets the same gradient, 1e-3 of the group's largest), and learning: the loss on a
  fixed batch falls by ≥ 0.5 % within the K steps. The probe's docstring argues the tolerances per dtype. G6 runs
  the same check with the migrated model sharded over its ranks (torchrun, the target's FSDP2 applier) against the
  single-process source, same tolerances.
- G6 ``sharded``: the distributed run's first logged loss vs the single-process loss on the same global batch
  (``probes/sharded_reference.py``). Tolerance: |Δ| ≤ 1e-4 · max(1, |loss|) — the log prints 7 significant digits
  and gloo sums fp32 in a different order than one process does.

Each record carries ``status`` (pass / fail / not_comparable), the figures, and the problems; the gate record keeps
them under ``parity`` so the report and the eval harness read the same numbers.
"""

from __future__ import annotations

import time
from typing import Any

from msmigrate.agent.gates.evidence import evidence_item, probe_runtime
from msmigrate.agent.routes.fsdp2.gates.master_dtype import delivered_or_example, master_sentence
from msmigrate.tools.target_checks import model_parity, training_parity, training_probe_limit
from msmigrate.tools.runtime import run_probe
from msmigrate.tools.source_step import SOURCE_STEP_ADVICE

SHARDED_RTOL = 1e-4
# how the parity probes' dtype problem begins (probes/_dtypes.py ``cast_problem``)
DTYPE_PROBLEM = "in another dtype than the source class built from the same config"


def _status(passed: bool | None) -> str:
    return "not_comparable" if passed is None else ("pass" if passed else "fail")


def model_parity_check(deps: Any, state: dict[str, Any], batch_file: str | None = None,
                       media_token_id: int | None = None,
                       dropped_keys: list[str] | None = None) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """(evidence item, problems, parity record) for G1; with ``batch_file`` (G2's collated batch) the same check on
    the target pipeline's batch, for a source whose forward G1's batch could not feed (``media_token_id``: the id
    that batch's media runs use, for a source whose caller sets it on the model); ``dropped_keys``: the processor
    outputs to check instead of the plan's dropped list (G2: those its collated batch lacks)."""
    plan, ctx = state["plan"], deps.ctx
    custom = plan["route"] == "custom"
    t0 = time.time()
    # where the source ships training code, G1's reference is that code's loss path on its own collated batch
    own = (plan.get("source_training") or {}).get("kind") == "own" and not batch_file
    # the processor outputs the target's pipeline will not carry (the plan's data contract): each must leave the
    # source's own loss and logits unchanged on its own processor's batch, or the migration trains another model
    contract = plan.get("data_contract") or {}
    dropped = sorted({d["key"] for d in contract.get("dropped") or [] if d.get("key") != "labels"}
                     | set(contract.get("collator_drops") or []) | set(plan.get("collator_drops") or []))
    dropped = dropped if dropped_keys is None else sorted(dropped_keys)
    res = model_parity(ctx, plugins=[plan["plugin_dir"]], model_id=plan["model_id"], trust_remote_code=custom,
                       sample_data=ctx.data_path if own else (None if custom or batch_file else ctx.data_path),
                       batch_file=batch_file, media_token_id=media_token_id,
                       source_training=plan.get("source_training") if own else None, dropped_keys=dropped)
    r = (res.data.get("result") or {}) if res.data else {}
    record = {"status": _status(r.get("passed")) if res.ok else "fail",
              "eager": r.get("eager"), "meta": r.get("meta"), "source_loss": r.get("source_loss"),
              "tolerance": r.get("tolerance"), "batch_source": r.get("batch_source"),
              "source_class": r.get("source_class"), "plugin_class": r.get("plugin_class"),
              "nonpersistent_buffers": r.get("nonpersistent_buffers"), "tied": r.get("tied"),
              "why_not": r.get("why_not"), "unfed": r.get("unfed"), "mode": r.get("mode"),
              "first_divergence": r.get("first_divergence"), "caller_set": r.get("caller_set"),
              "meta_still_nan": r.get("meta_still_nan"), "source_called_as": r.get("source_called_as"),
              "dropped_outputs": r.get("dropped_outputs"), "dtype_differences": r.get("dtype_differences"),
              "problems": list(r.get("problems") or ([] if res.ok else [f"model parity probe: {res.error}"]))}
    if r.get("dtype_differences"):  # the plugin casts part of itself: what the delivered config means instead
        sentence = master_sentence(delivered_or_example(ctx, plan))
        record["master_weights"] = sentence
        record["problems"] = [f"{p}; {sentence}" if DTYPE_PROBLEM in p else p for p in record["problems"]]
    label = "model parity (plugin vs source class)" + (" on the collated batch" if batch_file else "") + (
        " for the outputs the collated batch lacks" if dropped_keys is not None else "")
    ev = evidence_item(label, res.data.get("argv", []), res.data.get("returncode"),
                       t0, time.time(), res.data.get("stderr_tail", "") if not res.ok else "", record,
                       **probe_runtime(res))
    return ev, [f"model parity: {p}" for p in record["problems"]], record


def plugin_rejections(problems: list[str]) -> list[str]:
    """Of a model parity run's problem lines, the one saying the source's own model takes a batch the plugin's forward
    rejects (``probes/model_parity.py: plugin_rejects``): what a gate keeps when it asks the source about a batch its
    forward failed on (any other line of that run says nothing about the failure)."""
    return [p for p in problems if "the plugin's forward" in p and "rejects it" in p]


def needs_collated_batch(model: dict[str, Any] | None) -> bool:
    """G1's model parity could not run its forward on the batch it had (a source forward that requires media the
    synthetic batch lacks, because its processor is a bare tokenizer): G2's collated batch can feed it."""
    return bool(model) and model.get("status") == "not_comparable" and bool(model.get("unfed"))


def data_parity_record(check: dict[str, Any], forward: dict[str, Any] | None) -> tuple[list[str], dict[str, Any]]:
    """(problems, parity record) for G2 from the data_check probe's ``parity`` and the forward's ``vision``."""
    parity = check.get("parity") or {}
    problems = list(parity.get("problems") or [])
    if not parity:
        problems.append("data parity was not measured (no source samples to compare with)")
    vision = (forward or {}).get("vision") or {}
    features, tokens = vision.get("features"), vision.get("media_tokens")
    if features is not None and tokens is not None and features != tokens:
        problems.append(f"the collated batch has {tokens} media tokens, the model consumes {features} vision "
                        "features")
    data_conv = parity.get("label_convention")
    loss_conv = ((forward or {}).get("loss_labels") or {}).get("alignment")
    problems += label_alignment_problems(data_conv, loss_conv)
    record = {k: parity.get(k) for k in ("samples_compared", "tokens", "trained", "masked", "media_tokens",
                                         "source_media_tokens", "media_trained", "prompt_match", "media_token_id", "media_expanded_by",
                                         "label_convention", "labels_unused_by_shift", "decoded_sample",
                                         "per_sample", "oracle", "data_file", "keys_read", "source_trained",
                                         "media_spans", "source_media_spans", "source_label_convention")}
    record.update(status="fail" if problems else "pass", vision_features=features, batch_media_tokens=tokens,
                  loss_label_alignment=loss_conv,
                  vision_why_not=vision.get("why_not") if vision else "not counted", problems=problems)
    return [f"data parity: {p}" for p in problems], record


def label_alignment_problems(data_convention: Any, loss_alignment: Any) -> list[str]:
    """The dataset's label convention (read from its labels) against the one the model's loss assumes (read from
    the forward on the collated batch). Either unknown: nothing to say."""
    if not isinstance(data_convention, str) or loss_alignment not in ("aligned", "shifted"):
        return []
    if data_convention == "shifted" and loss_alignment == "aligned":
        return ["labels are shifted twice: the dataset's labels are already the next token and the model's loss "
                "shifts them again (every position trains the token two ahead)"]
    if data_convention == "aligned" and loss_alignment == "shifted":
        return ["labels are shifted nowhere: the dataset's labels equal the input ids and the model's loss does not "
                "shift them (every position trains its own input token)"]
    return []


def media_token_id(state: dict[str, Any]) -> int | None:
    """The media token id a source forward on the target's batches needs: the plan's, else (a source processor that
    does not expand media, e.g. InternVL's remote code, whose caller sets img_context_token_id) the one G2's data
    parity read from the target's media spans, as G2 gives its forward and model parity; without it the source's
    forward cannot place its image features."""
    media = (state["plan"].get("media_expansion") or {}).get("media_token_id")
    if media is None:
        g2 = ((state.get("gates") or {}).get("G2") or {}).get("parity") or {}
        media = (g2.get("data") or {}).get("media_token_id")
    return media


def training_parity_check(deps: Any, state: dict[str, Any], nproc: int = 1,
                          real_weights: bool = False, step_s: float | None = None,
                          setup_s: float | None = None) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """(evidence item, problems, parity record) for G4: K steps, source vs migrated model (module doc); ``nproc`` > 1
    for G6: the migrated model sharded over that many ranks, the source one process; ``real_weights``: both start
    from the source's own checkpoint cut to a few layers per tower (its first, or one of each kind; G4's second
    run, where the source has safetensors weights); ``step_s``/``setup_s``: the gate's own launch's median step and wall on this config, which
    size the probe's time limit (``training_probe_limit``: K stays the spec's, the limit follows the work)."""
    plan, ctx = state["plan"], deps.ctx
    t0 = time.time()
    media = media_token_id(state)
    steps = deps.spec.launch.parity_steps
    limit, basis = training_probe_limit(ctx, steps, step_s, setup_s)
    user_step = plan.get("source_step") or None  # the user's step (--source-step), copied into the run folder
    res = training_parity(ctx, plugins=[plan["plugin_dir"]], model_id=plan["model_id"],
                          config_path=ctx.target / plan["config_path"], steps=steps,
                          trust_remote_code=plan["route"] == "custom", media_token_id=media, nproc=nproc,
                          source_training=plan.get("source_training"), real_weights=real_weights, timeout=limit,
                          dtype=deps.spec.launch.parity_dtype,
                          source_step=user_step["probe_ref"] if user_step else None)
    r = (res.data.get("result") or {}) if res.data else {}
    record = {"status": _status(r.get("passed")) if res.ok else "fail", "probe_limit_s": round(limit),
              "probe_limit_basis": basis, "probe_seconds": round(time.time() - t0, 1),
              **{k: r.get(k) for k in ("steps", "source", "target", "grad_groups", "fixed_batch", "tolerance",
                                       "settings", "source_step", "first_loss_cause", "why_not", "source_class",
                                       "plugin_class", "target_param_groups", "nproc", "sharding", "launch", "weights",
                                       "layers_per_tower", "dtype", "precision", "source_unpatched")},
              "problems": list(r.get("problems") or ([] if res.ok else [f"training parity probe: {res.error}"]))}
    if user_step:  # the report names the user's file, not the run folder's copy the probe ran
        named = f"{user_step['file']}:{user_step['function']}"
        record["source_step"] = str(record.get("source_step") or "").replace(user_step["probe_ref"], named) or None
        record["problems"] = [p.replace(user_step["probe_ref"], named) for p in record["problems"]]
        record["why_not"] = record["why_not"].replace(user_step["probe_ref"], named) if record.get("why_not") else None
        record["user_source_step"] = {k: user_step.get(k) for k in ("given", "file", "function", "form", "copy",
                                                                     "sha256")}
    elif record["status"] == "not_comparable" and plan.get("source_gives_no_loss"):
        record["why_not"] = f"{record.get('why_not')}; {SOURCE_STEP_ADVICE}"
    src, tgt = record.get("source") or {}, record.get("target") or {}
    if src.get("loss") and tgt.get("loss"):
        record["max_dloss"] = max(abs(a - b) for a, b in zip(src["loss"], tgt["loss"]))
        record["max_rel_dgrad_norm"] = max(abs(a - b) / max(1e-6, abs(a))
                                           for a, b in zip(src["grad_norm"], tgt["grad_norm"]))
    ranks = (f", {nproc} ranks" if nproc > 1 else "") + (", real weights cut" if real_weights else "")
    ev = evidence_item(f"training parity ({record.get('steps') or deps.spec.launch.parity_steps} steps{ranks}, source "
                       "vs migrated)", res.data.get("argv", []), res.data.get("returncode"), t0, time.time(),
                       res.data.get("stderr_tail", "") if not res.ok else "", record, **probe_runtime(res))
    return ev, [f"training parity: {p}" for p in record["problems"]], record


def sharded_parity_check(deps: Any, config_path: str | None, nproc: int,
                         losses: list[float]) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """(evidence item, problems, parity record) for G6: its first loss vs the single-process reference."""
    ctx = deps.ctx
    t0 = time.time()
    if not config_path or not losses:
        record = {"status": "fail", "problems": ["no distributed launch config or losses to compare"]}
        ev = evidence_item("sharded parity (first step vs single process)", [], None, t0, time.time(), "", record)
        return ev, [f"sharded parity: {p}" for p in record["problems"]], record
    res = run_probe(ctx.runtime_python, "sharded_reference",
                    ["--target", str(ctx.target), "--config", str(config_path), "--nproc", str(nproc)],
                    cwd=ctx.target, env_extra={"NON_MEGATRON": "true", "HF_HUB_OFFLINE": "1",
                                               "TRANSFORMERS_OFFLINE": "1"}, timeout=ctx.probe_timeout_s)
    r = (res.data.get("result") or {}) if res.data else {}
    first = losses[0]
    record: dict[str, Any] = {"distributed_first_loss": first, "nproc": nproc, "reference_loss": r.get("loss"),
                              "per_sample": r.get("per_sample"), "indices": r.get("indices"),
                              "tolerance": f"{SHARDED_RTOL:g} * max(1, |loss|)", "problems": []}
    if not res.ok:
        record.update(status="fail", problems=[f"reference probe: {res.error}"])
    elif not r.get("comparable"):
        record.update(status="not_comparable", why_not=r.get("why_not"))
    else:
        delta = abs(first - r["loss"])
        record["dloss"] = delta
        if delta > SHARDED_RTOL * max(1.0, abs(r["loss"])):
            record["problems"].append(f"{nproc}-rank first-step loss {first:.6g} vs single-process {r['loss']:.6g} "
                                      f"on the same global batch (|Δ| {delta:.3g})")
        record["status"] = "fail" if record["problems"] else "pass"
    ev = evidence_item("sharded parity (first step vs single process)", res.data.get("argv", []),
                       res.data.get("returncode"), t0, time.time(),
                       res.data.get("stderr_tail", "") if not res.ok else "", record, **probe_runtime(res))
    return ev, [f"sharded parity: {p}" for p in record["problems"]], record


def parity_summary(record: dict[str, Any] | None) -> str:
    """One line of figures for the gate table."""
    if not record:
        return "not run"
    status = record.get("status")
    if status == "not_comparable":  # figures are None then: the reason is what the gate table must show
        return f"not comparable: {record.get('why_not')}"
    if "eager" in record:
        e, m = record.get("eager") or {}, record.get("meta") or {}
        return (f"{status}: max|Δlogit| {_fig(e.get('max_abs_dlogit'))} / meta {_fig(m.get('max_abs_dlogit'))}, "
                f"|Δloss| {_fig(e.get('dloss'))} / meta {_fig(m.get('dloss'))}")
    if "trained" in record and str(record.get("oracle") or "").startswith("the source's own training"):
        return (f"{status} against the source's own training pipeline: ids {'=' if record.get('prompt_match') else '≠'}"
                f" source (media runs collapsed), trained {record.get('trained')} (source "
                f"{record.get('source_trained')}), media {record.get('media_tokens')} (source "
                f"{record.get('source_media_tokens')}, features {record.get('vision_features')}), labels "
                f"{record.get('label_convention')} (loss {record.get('loss_label_alignment') or '?'})")
    if "trained" in record:
        return (f"{status}: prompt ids {'=' if record.get('prompt_match') else '≠'} source, labels "
                f"{record.get('label_convention')} (loss {record.get('loss_label_alignment') or '?'}), trained "
                f"{record.get('trained')} / masked {record.get('masked')}, media {record.get('media_tokens')} "
                f"(source {record.get('source_media_tokens')}, features {record.get('vision_features')})")
    if "fixed_batch" in record:
        fixed = record.get("fixed_batch") or {}
        fall = fixed.get("fall")
        return (f"{status}: {record.get('steps')} steps, max |Δloss| {_fig(record.get('max_dloss'))}, max rel "
                f"Δgrad-norm {_fig(record.get('max_rel_dgrad_norm'))}, fixed-batch loss "
                f"{_loss(fixed.get('before'))} → {_loss(fixed.get('after'))}"
                + (f" ({-fall:+.2%})" if isinstance(fall, float) else "")
                + (f", source's own {-fixed['source_fall']:+.2%}" if isinstance(fixed.get("source_fall"), float)
                   else "")
                + (f"; probe {record['probe_seconds']:.0f} s of {record['probe_limit_s']} s"
                   if record.get("probe_limit_s") and record.get("probe_seconds") is not None else ""))
    if "distributed_first_loss" in record:
        return (f"{status}: {record.get('nproc')}-rank {_loss(record.get('distributed_first_loss'))} vs 1-process "
                f"{_loss(record.get('reference_loss'))} (|Δ| {_fig(record.get('dloss'))})")
    return str(status)


def _loss(x: Any) -> str:
    return f"{x:.7g}" if isinstance(x, float) else str(x)


def _fig(x: Any) -> str:
    return f"{x:.2e}" if isinstance(x, float) else str(x)
