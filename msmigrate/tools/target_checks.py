"""Checks that run inside the target runtime against a plugin as the trainer would load it — shared by the gates
(G1–G3) and by the policy-facing tools, so a policy can run exactly what the gate will run before it says "done".

Every probe output is saved under ``<run_dir>/probes/`` so findings can be cited and re-read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from msmigrate.core.tool_result import ToolResult
from msmigrate.core.run_context import RunContext
from msmigrate.tools.repo_reader import target_inventory
from msmigrate.tools.runtime import run_probe
from msmigrate.tools.yaml_validator import schema_from_target, validate_config
from msmigrate.tools.yaml_validator.schema import model_of

PROBE_ENV = {"NON_MEGATRON": "true", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
# The probes that train (training parity, HF export) get at least this long: they run many steps, not one forward;
# a larger spec limit (launch.probe_timeout_s) raises them too, and so does the work the gate measured
# (``training_probe_limit``)
TRAINING_PROBE_FLOOR_S = 600.0
# Measured step times on a shared host vary about 2x between steps of one run (seen 19-38 s on a real-scale internvl
# on 2 loaded cores): the measured budget is doubled so a slow stretch does not end a probe that is progressing
STEP_TIME_MARGIN = 2.0


# A refusal, not a failure of the code: the classify node asks again when a gate reports it (never classifies it)
UNAPPROVED = "running the code written in this run needs the user's approval, which is asked"


def unapproved(ctx: RunContext) -> ToolResult | None:
    """With approval on, code this run wrote runs only after the user said yes (asked when the phase ends, at its
    gate); until then every check that would import it is refused — an error observation, not a crash."""
    if ctx.approval and not ctx.code_approved:
        return ToolResult.failure(f"{UNAPPROVED} when the phase ends (at its gate); finish the phase without this "
                                  "check")
    return None


def _save(ctx: RunContext, name: str, payload: Any) -> str:
    out = ctx.run_dir / "probes"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1, default=str))
    return str(path)


def plugin_args(ctx: RunContext, plugins: list[str], model_id: str, model_path: Path | None = None) -> list[str]:
    args = ["--target", str(ctx.target), "--model-id", model_id,
            "--model-name-or-path", str(model_path or ctx.source), "--attn-implementation", "sdpa"]
    for p in plugins:
        args += ["--plugin", p]
    return args


def module_tree(ctx: RunContext, *, plugins: list[str] | None = None, model_id: str | None = None,
                trust_remote_code: bool = False) -> ToolResult:
    """The module tree of the plugin class (when ``model_id`` is given) or of the source model, on meta."""
    if model_id:
        if (refused := unapproved(ctx)) is not None:
            return refused
        args, name = plugin_args(ctx, plugins or [], model_id), f"module_tree_{model_id}"
    else:
        args, name = ["--model", str(ctx.source)], "module_tree_source"
    if trust_remote_code:  # the plugin build loads the source's AutoConfig too (custom code needs the flag)
        args += ["--trust-remote-code"]
    res = run_probe(ctx.runtime_python, "module_tree", args, cwd=ctx.target, env_extra=PROBE_ENV,
                    timeout=ctx.probe_timeout_s)
    if res.ok:
        res.data["saved"] = _save(ctx, name, res.data["result"])
    return res


def forward_check(ctx: RunContext, *, plugins: list[str], model_id: str, batch_file: str | None = None,
                  trust_remote_code: bool = False, sample_data: Path | None = None,
                  media_token_id: int | None = None, fresh_untrained: bool = False) -> ToolResult:
    """One forward with labels through the plugin class on a shrunk config: a real collated batch, else the source
    processor's batch of a real sample (``sample_data``), else a synthetic one. With ``media_token_id`` the result
    also counts the batch's media tokens and the vision features the forward consumed (``vision``).
    ``fresh_untrained``: the delivered config loads weights, so the fresh meta-init path (init_weights, no load) is
    recorded (``result.fresh_note``) rather than failed."""
    if (refused := unapproved(ctx)) is not None:
        return refused
    args = plugin_args(ctx, plugins, model_id) + ["--shrink-layers", "2"]
    if media_token_id is not None:
        args += ["--media-token-id", str(media_token_id)]
    if batch_file:
        args += ["--batch", batch_file]
    elif sample_data:
        args += ["--sample-data", str(sample_data)]
    if trust_remote_code:
        args += ["--trust-remote-code"]
    if fresh_untrained:
        args += ["--fresh-untrained"]
    res = run_probe(ctx.runtime_python, "forward_smoke", args, cwd=ctx.target, env_extra=PROBE_ENV,
                    timeout=ctx.probe_timeout_s)
    if res.ok:
        r = res.data["result"]
        res.data["saved"] = _save(ctx, f"forward_{'batch' if batch_file else 'synthetic'}_{model_id}", r)
        if not r.get("has_loss_attr") or not r.get("finite"):
            return ToolResult.failure(
                f"forward returned {r.get('output_type')} with loss={r.get('loss')} (has .loss: "
                f"{r.get('has_loss_attr')}, finite: {r.get('finite')}); the trainer needs a finite output.loss",
                **res.data)
    return res


def framework_load_check(ctx: RunContext, *, plugins: list[str], model_id: str, load: str,
                         load_strict: bool = False, load_rank0_and_broadcast: bool = False,
                         trust_remote_code: bool = False) -> ToolResult:
    """The target's own HF weight load (the function its trainer calls for an HF ``training.load``, with the
    config's load settings) on the plugin class built on meta: what G4's launch does before its first step."""
    if (refused := unapproved(ctx)) is not None:
        return refused
    args = plugin_args(ctx, plugins, model_id) + ["--load", str(load)]
    if load_strict:
        args += ["--load-strict"]
    if load_rank0_and_broadcast:
        args += ["--load-rank0-and-broadcast"]
    if trust_remote_code:
        args += ["--trust-remote-code"]
    res = run_probe(ctx.runtime_python, "framework_load", args, cwd=ctx.target, env_extra=PROBE_ENV,
                    timeout=ctx.probe_timeout_s)
    if res.ok:
        res.data["saved"] = _save(ctx, f"framework_load_{model_id}", res.data["result"])
    return res


def data_check(ctx: RunContext, config_path: Path, *, parity_data: Path | None = None,
               media_token_id: int | None = None, trust_remote_code: bool = False,
               source_training: dict[str, Any] | None = None, name: str = "data_check") -> ToolResult:
    """Real samples through the target's dataset → collator; with ``parity_data`` (the raw samples the config maps)
    the mapped samples are also compared with the source's own processing (``result.parity``): its own training
    dataset + collator where ``source_training`` (the plan's training facts) found them, else its chat template +
    processor. ``name``: what its result and batch files under probes/ are called (a second check on another YAML
    keeps the first one's)."""
    if (refused := unapproved(ctx)) is not None:
        return refused
    out = ctx.run_dir / "probes"
    out.mkdir(parents=True, exist_ok=True)
    batch = "batch.pt" if name == "data_check" else f"{name}_batch.pt"
    args = ["--target", str(ctx.target), "--config", str(config_path), "--batch-out", str(out / batch)]
    if parity_data is not None:
        args += ["--parity-source", str(ctx.source), "--parity-data", str(parity_data)]
        if media_token_id is not None:
            args += ["--media-token-id", str(media_token_id)]
        if trust_remote_code:
            args += ["--trust-remote-code"]
        if source_training and source_training.get("kind") == "own":
            facts = out / "source_training.json"
            facts.write_text(json.dumps(source_training), encoding="utf-8")
            args += ["--source-training", str(facts)]
    res = run_probe(ctx.runtime_python, "data_check", args, cwd=ctx.target, env_extra=PROBE_ENV,
                    timeout=ctx.probe_timeout_s)
    if res.ok:
        res.data["saved"] = _save(ctx, name, res.data["result"])
        missing = res.data["result"].get("media", {}).get("missing")
        if missing:
            return ToolResult.failure(f"Media {missing[0]} does not exist (and {len(missing) - 1} more)", **res.data)
    return res


def _facts_file(ctx: RunContext, source_training: dict[str, Any]) -> Path:
    """The plan's source training facts as a file a probe reads."""
    facts = ctx.run_dir / "probes" / "source_training.json"
    facts.parent.mkdir(parents=True, exist_ok=True)
    facts.write_text(json.dumps(source_training), encoding="utf-8")
    return facts


def model_parity(ctx: RunContext, *, plugins: list[str], model_id: str, trust_remote_code: bool = False,
                 sample_data: Path | None = None, batch_file: str | None = None,
                 media_token_id: int | None = None, source_training: dict[str, Any] | None = None,
                 dropped_keys: list[str] | None = None) -> ToolResult:
    """The plugin class (eager, and meta init + load) against the source's own class on one shared random init and
    the same batch, fp32 on CPU (``probes/model_parity.py``); ``batch_file``: that batch is a collated one of the
    target's pipeline (G2's); ``source_training`` (the plan's training facts, with ``sample_data``: the source's
    records): the batch is the source's own dataset + collator's and the reference its own loss path;
    ``dropped_keys``: processor outputs the target's pipeline drops, each checked to leave the source's loss and
    logits on its own processor's batch unchanged. ``ok`` means the probe ran; ``result.passed`` is the verdict."""
    if (refused := unapproved(ctx)) is not None:
        return refused
    args = plugin_args(ctx, plugins, model_id) + ["--model", str(ctx.source), "--shrink-layers", "2"]
    if sample_data and source_training and source_training.get("kind") == "own" and not batch_file:
        args += ["--source-training", str(_facts_file(ctx, source_training))]
    if sample_data:
        args += ["--sample-data", str(sample_data)]
    if batch_file:
        args += ["--batch-file", str(batch_file)]
    if batch_file and media_token_id is not None:
        args += ["--media-token-id", str(media_token_id)]
    for key in dropped_keys or []:
        args += ["--dropped-key", key]
    if trust_remote_code:
        args += ["--trust-remote-code"]
    res = run_probe(ctx.runtime_python, "model_parity", args, cwd=ctx.target, env_extra=PROBE_ENV,
                    timeout=ctx.probe_timeout_s)
    if res.ok:
        res.data["saved"] = _save(ctx, f"model_parity_{model_id}{'_collated' if batch_file else ''}",
                                  res.data["result"])
    return res


def training_probe_limit(ctx: RunContext, steps: int, step_s: float | None = None,
                         setup_s: float | None = None) -> tuple[float, str]:
    """(seconds, why) a K-step training parity probe may run: the floor or the spec's limit, raised to what the gate
    measured where it measured it — ``step_s``, the trainer's median step on this config on this host, times the 2K
    steps the probe runs (K source, K migrated), plus ``setup_s`` (the measured launch's own wall: build, load,
    first-step warm-up), times ``STEP_TIME_MARGIN``. A real-scale source takes minutes per probe; a tiny one keeps
    the floor."""
    floor = max(TRAINING_PROBE_FLOOR_S, ctx.probe_timeout_s)
    if not step_s or step_s <= 0:
        return floor, f"{floor:.0f} s (launch.probe_timeout_s / floor; no step time measured)"
    measured = STEP_TIME_MARGIN * (2 * steps * step_s + (setup_s or 0.0))
    basis = (f"{STEP_TIME_MARGIN:g} x (2 x {steps} steps x {step_s:.1f} s measured median step + "
             f"{setup_s or 0.0:.0f} s launch setup) = {measured:.0f} s")
    if measured <= floor:
        return floor, f"{floor:.0f} s (launch.probe_timeout_s / floor; measured need {basis})"
    return measured, basis


def training_parity(ctx: RunContext, *, plugins: list[str], model_id: str, config_path: Path, steps: int,
                    trust_remote_code: bool = False, media_token_id: int | None = None, nproc: int = 1,
                    source_training: dict[str, Any] | None = None, real_weights: bool = False,
                    timeout: float | None = None, dtype: str = "fp32", source_step: str | None = None) -> ToolResult:
    """``steps`` optimizer steps of the source class and of the plugin class in the target trainer's step, same
    weights, batches and optimizer settings, fp32 on CPU (``probes/training_parity.py``); ``nproc`` > 1: the plugin
    sharded over that many torchrun ranks against the single-process source; ``source_training`` (the plan's facts,
    ``kind: own``): the source side runs the source's own loss path; ``real_weights``: both start from the source's
    own checkpoint cut to 2 layers per tower instead of a random init; ``timeout``: the probe's limit
    (``training_probe_limit``; never below the floor or the spec's); ``dtype`` bf16: both sides compute in bf16 on
    fp32 master weights, as the delivered FSDP2 plan trains on NPU (``probes/_precision.py``); ``source_step``
    (``FILE.py:function``, a file the target runtime can read: the run folder's copy): the user's own training step
    is the source side (``tools/source_step.py``). ``ok`` means the probe ran; ``result.passed`` is the verdict
    (None: not comparable)."""
    if (refused := unapproved(ctx)) is not None:
        return refused
    args = plugin_args(ctx, plugins, model_id) + ["--model", str(ctx.source), "--shrink-layers", "2",
                                                  "--config", str(config_path), "--steps", str(steps)]
    if media_token_id is not None:
        args += ["--media-token-id", str(media_token_id)]
    if trust_remote_code:
        args += ["--trust-remote-code"]
    if source_training and source_training.get("kind") == "own":
        args += ["--source-training", str(_facts_file(ctx, source_training))]
    if source_step:
        args += ["--source-step", source_step]
    if real_weights:
        args += ["--real-weights"]
    if dtype != "fp32":
        args += ["--dtype", dtype]
    limit = max(TRAINING_PROBE_FLOOR_S, ctx.probe_timeout_s, timeout or 0.0)
    if nproc > 1:  # not --nproc: torchrun would read it as its own; the ranks end a minute before the probe does
        args += ["--ranks", str(nproc), "--rank-timeout", str(int(limit - 60))]
    res = run_probe(ctx.runtime_python, "training_parity", args, cwd=ctx.target, env_extra=PROBE_ENV, timeout=limit)
    if res.ok:
        suffix = (f"_{nproc}ranks" if nproc > 1 else "") + ("_real_weights" if real_weights else "") + (
            f"_{dtype}" if dtype != "fp32" else "")
        res.data["saved"] = _save(ctx, f"training_parity_{model_id}{suffix}", res.data["result"])
    return res


def hf_export(ctx: RunContext, *, plugins: list[str], model_id: str, checkpoint: Path, out: Path, config_path: Path,
              trust_remote_code: bool = False, media_token_id: int | None = None) -> ToolResult:
    """The gate run's DCP checkpoint exported to an HF folder (the target's converter for the model id where it has
    one, else safetensors + the source's non-weight files), loaded into the source class and compared with the
    trained target model (``probes/hf_export.py``). ``ok`` means the probe ran; ``result.passed`` is the verdict."""
    if (refused := unapproved(ctx)) is not None:
        return refused
    args = plugin_args(ctx, plugins, model_id) + ["--model", str(ctx.source), "--checkpoint", str(checkpoint),
                                                  "--out", str(out), "--config", str(config_path)]
    if media_token_id is not None:
        args += ["--media-token-id", str(media_token_id)]
    if trust_remote_code:
        args += ["--trust-remote-code"]
    res = run_probe(ctx.runtime_python, "hf_export", args, cwd=ctx.target, env_extra=PROBE_ENV,
                    timeout=max(TRAINING_PROBE_FLOOR_S, ctx.probe_timeout_s))
    if res.ok:
        res.data["saved"] = _save(ctx, f"hf_export_{model_id}", res.data["result"])
    return res


def decay_groups_check(ctx: RunContext, *, plugins: list[str], model_id: str, config_path: Path,
                       trust_remote_code: bool = False) -> dict[str, Any] | None:
    """Which parameters the target's own optimizer decays for the delivered config, against the HF Trainer's decay
    rule on the source class (``probes/decay_groups.py``); None when the probe could not run (said by the caller as
    not examined, never a pass)."""
    if unapproved(ctx) is not None:
        return None
    args = plugin_args(ctx, plugins, model_id) + ["--model", str(ctx.source), "--config", str(config_path)]
    if trust_remote_code:
        args += ["--trust-remote-code"]
    res = run_probe(ctx.runtime_python, "decay_groups", args, cwd=ctx.target, env_extra=PROBE_ENV,
                    timeout=ctx.probe_timeout_s)
    if not res.ok:
        return {"examined": False, "why_not": f"the decay-groups probe failed: {res.error}"[:400]}
    _save(ctx, f"decay_groups_{model_id}", res.data["result"])
    return res.data["result"]


def config_check(ctx: RunContext, config_path: Path, *, tree: dict | None, device: str | None = None) -> ToolResult:
    """The strict validator with the schema from the target's own argument models (cached per commit)."""
    if (refused := unapproved(ctx)) is not None:  # the schema probe imports the target, plugins included
        return refused
    schema = schema_from_target(ctx.target, ctx.runtime_python, cache_dir=ctx.run_dir / "probes",
                                timeout=ctx.probe_timeout_s)
    if not schema.ok:
        return ToolResult.failure(f"could not derive the config schema from the target: {schema.error}", **schema.data)
    inventory = target_inventory(ctx.target)
    res = validate_config(Path(config_path), schema=schema.data["schema"],
                          inventory=inventory.data if inventory.ok else None, module_tree=tree,
                          target_root=ctx.target, device=device)
    res.data["saved"] = _save(ctx, "config_findings", res.data.get("findings", []))
    res.data["training_defaults"] = section_defaults(schema.data["schema"], "training")
    return res


def section_defaults(schema: dict[str, Any], section: str) -> dict[str, Any]:
    """A top-level section's field defaults, as the target's own argument models state them."""
    field = (schema.get("fields") or {}).get(section) or {}
    node = model_of(field.get("type") or {}) or {}
    return {k: f["default"] for k, f in (node.get("fields") or {}).items() if "default" in f}


def rendezvous_check(ctx: RunContext, host: str) -> dict[str, Any] | None:
    """The launch script's rendezvous host resolved and connected to in the target runtime (probes/
    rendezvous_host.py); None when the probe could not run (nothing is concluded from that)."""
    res = run_probe(ctx.runtime_python, "rendezvous_host", ["--host", host], cwd=ctx.target, env_extra=PROBE_ENV,
                    timeout=min(120.0, ctx.probe_timeout_s or 120.0))
    if not res.ok:
        return None
    _save(ctx, "rendezvous_host", res.data["result"])
    return res.data["result"]


def trainer_args_check(ctx: RunContext, args: list[str], cwd: str) -> dict[str, Any] | None:
    """The trainer's own configuration loading on the arguments a launch line hands it, from ``cwd`` of the target
    (probes/trainer_args.py); None when the probe could not run (nothing is concluded from that)."""
    res = run_probe(ctx.runtime_python, "trainer_args", ["--call-json", json.dumps({"args": args, "cwd": cwd})],
                    cwd=ctx.target, env_extra=PROBE_ENV, timeout=min(180.0, ctx.probe_timeout_s or 180.0))
    return res.data["result"] if res.ok else None


def launch_args_check(ctx: RunContext, argv: list[str]) -> dict[str, Any] | None:
    """A recorded launcher argv parsed by the runtime's own torchrun parser (probes/launch_args.py); None when the
    probe could not run (nothing is concluded from that)."""
    res = run_probe(ctx.runtime_python, "launch_args", ["--argv-json", json.dumps(argv)], cwd=ctx.target,
                    env_extra=PROBE_ENV, timeout=min(120.0, ctx.probe_timeout_s or 120.0))
    if not res.ok or "error" in res.data.get("result", {}):
        return None
    return res.data["result"]
