"""G4 functional, G5 reliability, G6 distributed end-to-end: real launches of the target's own trainer.

Gate launches bound the iteration count (``launch.gate_train_iters``, ≥ 5) through the per-run YAML the launcher
writes; they never edit the delivered config. On CPU a single-process launch needs meta-device init (otherwise the
framework falls back to DDP, which has no CPU path) — so G4/G5 set it, and say so in their evidence.

Four launches, not five: G4 saves a DCP checkpoint after its last iteration and G5's load run resumes from it. A
separate "save" launch would train the same model on the same data with the same seed and prove only that saving
works — which G4's own save proves. G5's same-seed repeat stays a launch of its own: re-reading G4's log would
compare G4 with itself, and the repeat IS the determinism proof."""

from __future__ import annotations

import hashlib
import math
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import yaml
from msmigrate.agent.launch_slots import launch_slots
from msmigrate.agent.stop_grace import StopGrace
from msmigrate.agent.routes.fsdp2.gates.bound_inputs import bound_overrides
from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.agent.routes.fsdp2.gates.hf_export import export_summary, hf_export_check
from msmigrate.agent.routes.fsdp2.gates.parity import (media_token_id, parity_summary, sharded_parity_check,
                                                       training_parity_check)
from msmigrate.agent.routes.fsdp2.weights_load import single_process_training, weights_note, weights_problems
from msmigrate.tools.cpu_shim import UNINITIALISED_MARK
from msmigrate.tools.launcher import LaunchSpec, launch
from msmigrate.tools.launcher.run import target_state
from msmigrate.tools.launcher.command import deep_merge, expand_dotted
from msmigrate.tools.launcher.records import PORT_IN_USE

MIN_STEPS = 5
REPRO_RTOL = 1e-5


def _tail(path: str | None, lines: int = 40) -> str:
    if not path or not Path(path).is_file():
        return ""
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])


def uninitialised_note(path: str | None) -> str | None:
    """The CPU shim's line naming a parameter/buffer that still held the fill of uninitialised memory when the
    model's first forward started (one per rank; the first is enough), without the launcher's rank prefix."""
    if not path or not Path(path).is_file():
        return None
    with open(path, encoding="utf-8", errors="replace") as log:
        for line in log:
            at = line.find(UNINITIALISED_MARK)
            if at >= 0:
                return line[at + len(UNINITIALISED_MARK):].strip()
    return None


def run_launch(deps: Any, state: dict[str, Any], gate: str, label: str, nproc: int, overrides: dict[str, Any],
               force: bool = False):
    """One launch with progress events; returns (ToolResult, evidence item, losses)."""
    ls = deps.spec.launch
    delivered = launched_config(str(Path(deps.ctx.target) / state["plan"]["config_path"]))
    overrides = deep_merge(bound_overrides(deps, delivered), overrides)
    spec = LaunchSpec(gate=f"{gate}-{label}", config=state["plan"]["config_path"], overrides=overrides, nproc=nproc,
                      nnodes=ls.nnodes, node_rank=ls.node_rank, master_addr=ls.master_addr, device=ls.device,
                      timeout_s=ls.timeout_s, no_output_timeout_s=ls.no_output_timeout_s, force=force)
    slots = launch_slots
    if ls.backend == "slurm":
        # the scheduler's queue is the launch limit (no local slots); single-process gates ask for one node; a job
        # still queued or running when the run's wall budget ends is cancelled
        started_at = state.get("started_at")
        spec.backend, spec.slurm, slots = "slurm", ls.slurm, nullcontext
        spec.nnodes = 1 if nproc == 1 else ls.nnodes
        # the wall budget counts the run's own time: the time it waited for the user moves the deadline
        spec.deadline = started_at + deps.idle_s + deps.spec.budgets.wall_seconds if started_at else None
    started = time.time()

    def progress(rec: Any) -> None:
        deps.emit("launch_progress", label=f"{gate} {label}", iteration=rec.iteration, total=rec.total, loss=rec.loss)

    # a stop of the run (chat's Ctrl-C) ends a scheduler job after a grace period; a local launch ends its step
    cancel = StopGrace(deps.stop_requested, ls.slurm.stop_grace_s, deps.emit, f"{gate} {label}") \
        if ls.backend == "slurm" and ls.slurm is not None else None
    with slots():  # in a batch: accelerator launches are limited separately from agent slots
        res = launch(deps.ctx, spec, on_progress=progress, cancel=cancel)
    data = res.data
    summary = data.get("summary", {})
    # head and tail of the (iteration, loss) curve overlap on short runs; key by iteration
    curve = dict(tuple(p) for p in summary.get("loss_curve_head", []) + summary.get("loss_curve_tail", []))
    losses = [curve[i] for i in sorted(curve)]
    metrics = {k: summary.get(k) for k in ("steps", "first_loss", "last_loss", "loss_trend", "loss_finite",
                                           "loss_constant", "median_step_ms", "samples_per_s", "global_batch_size",
                                           "checkpoints_saved", "checkpoint_loaded", "last_iteration")}
    metrics["losses"] = losses
    metrics["loss_iterations"] = sorted(curve)  # where each loss was logged (a resumed load run starts late)
    metrics["uninitialised"] = uninitialised_note(data.get("log_path"))
    metrics["weights"] = weights_note(launched_config(data.get("config_path")))
    metrics["loader"] = loader_note(launched_config(data.get("config_path")), delivered)
    ev = evidence_item(label, data.get("argv", []), data.get("exit_code"), started, time.time(),
                       _tail(data.get("log_path")), metrics, config_path=data.get("config_path"),
                       log_path=data.get("log_path"), launch_id=data.get("launch_id"), reused=data.get("reused"),
                       overrides=overrides, nproc=nproc, device=data.get("device"),
                       **({"port_collisions": data["port_collisions"]} if data.get("port_collisions") else {}),
                       **({k: data.get(k) for k in ("backend", "job_id", "nodes", "job_state")}
                          if data.get("backend") else {}))
    return res, ev, losses


def loader_note(launched: dict[str, Any], delivered: dict[str, Any]) -> str | None:
    """What a launch's dataloader ran otherwise than the delivered config asks (a CPU launch loads in the trainer's
    process: the same batches from the same sampler, no forked workers); None when they agree."""
    def workers(cfg: dict[str, Any]) -> Any:
        return ((cfg.get("data") or {}).get("dataloader_param") or {}).get("num_workers")

    ran, asked = workers(launched), workers(delivered)
    if ran == asked or not launched:
        return None
    kept = asked if asked is not None else "the framework's default"
    return (f"dataloader num_workers {ran} in this launch, {kept} in the delivered YAML: the same batches from the "
            "same batch sampler, loaded in the trainer's process")


def measured_work(ev: dict[str, Any] | None) -> dict[str, float | None]:
    """A launch's evidence as the parity probes' measure of work: its median step and its whole wall (seconds)."""
    metrics = (ev or {}).get("metrics") or {}
    step_ms = metrics.get("median_step_ms")
    return {"step_s": step_ms / 1000.0 if step_ms else None, "setup_s": (ev or {}).get("seconds")}


def launched_config(path: str | None) -> dict[str, Any]:
    """The per-run YAML a launch trained (what its overlay made of the delivered config); {} when unreadable."""
    try:
        cfg = yaml.safe_load(Path(path).read_text(encoding="utf-8")) if path else None
    except (OSError, yaml.YAMLError):
        return {}
    return cfg if isinstance(cfg, dict) else {}


def delivered_config(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    """The delivered YAML as the gates launch it (with the input binding of ``msmigrate verify`` applied)."""
    cfg = launched_config(str(Path(deps.ctx.target) / state["plan"]["config_path"]))
    return deep_merge(cfg, expand_dotted(bound_overrides(deps, cfg)))


def training_problems(res: Any, losses: list[float], label: str) -> list[str]:
    s = res.data.get("summary", {})
    problems = weights_problems(launched_config(res.data.get("config_path")), s, label) if res.ok else []
    if not res.ok:
        problems.append(f"{label}: {res.error}")
    if (s.get("steps") or 0) < MIN_STEPS:
        problems.append(f"{label}: only {s.get('steps') or 0} iteration lines (need ≥ {MIN_STEPS})")
    if not s.get("loss_finite", False) or any(not math.isfinite(x) for x in losses):
        problems.append(f"{label}: non-finite loss")
    if s.get("loss_constant"):
        problems.append(f"{label}: loss is constant ({s.get('first_loss')}) — labels or masking are wrong")
    note = uninitialised_note(res.data.get("log_path"))
    if problems and note:  # the likely why: a tensor nothing initialised (harmless while the loss stays right)
        problems.append(f"{label}: uninitialised storage at the first forward: {note}")
    return problems


def _record(gate: str, problems: list[str], evidence: list[dict], ok_summary: str, res: Any, launches: int) -> dict:
    failure = ""
    if problems:
        sig = (res.data.get("summary", {}) or {}).get("failure_signature") or {}
        failure = "\n".join([*problems, sig.get("key", ""), evidence[-1]["log_excerpt"] if evidence else ""])
    record = {"gate": gate, "passed": not problems, "summary": "; ".join(problems) if problems else ok_summary,
              "evidence": evidence, "failure_text": failure, "launches": launches}
    if problems and res.data.get("status") == PORT_IN_USE:
        # the launcher's relaunch on a fresh port collided too: a verdict on this host, not on the code; a gate
        # that failed only so is not counted among the failures on this target commit (agent/nodes/work.py)
        record["infrastructure"] = (f"the master port was taken before torchrun bound it, on every attempt "
                                    f"(ports {res.data.get('port_collisions') or '?'})")
    return record


def _single_process_overrides(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    """One process on CPU takes the delivered config's own build path and weights (``single_process_training``: a
    from_pretrained of a safetensors folder becomes the same folder's HF load; a custom class's own from_pretrained
    has no such equivalent and is kept as written); only the iteration count and the save interval differ."""
    custom = (state.get("plan") or {}).get("route") == "custom"
    weights = single_process_training(delivered_config(deps, state), custom)
    return {"training": {**weights, "train_iters": deps.spec.launch.gate_train_iters, "save_interval": 100000}}


def g4_checkpoint(deps: Any) -> Path:
    """Where G4 saves: named by the target's code state, so a G4 rerun after a repair never hands G5 a checkpoint of
    older code (a reused G4 launch is the same code, and so the same folder)."""
    code = hashlib.sha256(target_state(deps.ctx.target).encode()).hexdigest()[:12]
    return deps.ctx.run_dir / "checkpoints" / f"G4-{code}"


def _g4_overrides(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    iters = deps.spec.launch.gate_train_iters
    return {"training": {**_single_process_overrides(deps, state)["training"], "save": str(g4_checkpoint(deps)),
                         "save_interval": iters}}


def gate_functional(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    """The target's trainer runs single-process; then training parity: K steps of the source and of the migrated
    model compared step by step, and a learning check (``parity.training_parity_check``) — a loss that is finite and
    not constant proves neither."""
    res, ev, losses = run_launch(deps, state, "G4", "single-process", 1, _g4_overrides(deps, state))
    problems = training_problems(res, losses, "single-process")
    s = res.data.get("summary", {})
    evidence, parity, export = [ev], None, None
    # the parity probes' time limit follows this launch's measured step on this config (a real-scale source needs
    # minutes per probe, a tiny one keeps the floor)
    work = measured_work(ev)
    if not problems:
        ev_p, found, parity = training_parity_check(deps, state, **work)
        evidence.append(ev_p)
        problems += found
    real = None
    if not problems and any(Path(deps.ctx.source).glob("*.safetensors")):
        # the same K steps from the user's own checkpoint, cut to a few layers per tower (real weights, not a
        # random init: a real model is compared on its real weights within CPU memory)
        ev_r, found, real = training_parity_check(deps, state, real_weights=True, **work)
        evidence.append(ev_r)
        problems += [p.replace("training parity:", "training parity (real weights):", 1) for p in found]
    if not problems and s.get("checkpoints_saved"):
        # HF weights out: G4's saved checkpoint exported, loaded into the source class, logits vs the trained model
        ev_x, found, export = hf_export_check(deps, state, g4_checkpoint(deps), media_token_id(state))
        evidence.append(ev_x)
        problems += found
    record = _record("G4", problems, evidence, f"{s.get('steps')} steps, loss {s.get('first_loss'):.4g} → "
                     f"{s.get('last_loss'):.4g} ({s.get('loss_trend')}); training parity "
                     f"{parity_summary(parity)}; on the real weights cut {parity_summary(real)}; HF export "
                     f"{export_summary(export)}" if not problems else "", res,
                     0 if res.data.get("reused") else 1)
    record["parity"] = {k: v for k, v in (("training", parity), ("training_real_weights", real)) if v}
    if export:
        record["hf_export"] = export
    return record


def gate_reliability(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    iters = deps.spec.launch.gate_train_iters
    first = next((e for e in state["gates"].get("G4", {}).get("evidence", []) if e["metrics"].get("losses")), None)
    evidence, problems, launches = [], [], 0
    res, ev, losses = run_launch(deps, state, "G5", "repeat-same-seed", 1, _single_process_overrides(deps, state),
                              force=False)
    evidence.append(ev)
    launches += 0 if res.data.get("reused") else 1
    problems += training_problems(res, losses, "repeat")
    ref = first["metrics"]["losses"] if first else []
    n = min(3, len(ref), len(losses))
    if n == 0:
        problems.append("no reference losses from G4 to compare with")
    elif any(abs(a - b) > REPRO_RTOL * max(1.0, abs(a)) for a, b in zip(ref[:n], losses[:n])):
        problems.append(f"same seed, different losses: {ref[:n]} vs {losses[:n]}")
    # the round trip: G4 saved after its last iteration; resuming from it must continue at the next one
    last = res
    if not ((first or {}).get("metrics", {}).get("checkpoints_saved")):
        problems.append("G4 saved no checkpoint (no 'Saved checkpoint' line in its log): nothing to resume from")
    else:
        # a resume: G4's DCP checkpoint instead of the weights folder, with what G4 saved (optimizer, RNG) loaded
        saved = delivered_config(deps, state).get("training") or {}
        load = {"training": {**_single_process_overrides(deps, state)["training"], "train_iters": iters + 2,
                             "load": str(g4_checkpoint(deps)), "load_format": "auto", "save_interval": 100000,
                             "init_model_with_meta_device": True,  # built on meta, every tensor from the checkpoint
                             "no_load_optim": bool(saved.get("no_save_optim")),
                             "no_load_rng": bool(saved.get("no_save_rng"))}}
        res_l, ev_l, _ = run_launch(deps, state, "G5", "load", 1, load)
        evidence.append(ev_l)
        launches += 0 if res_l.data.get("reused") else 1
        s_l = res_l.data.get("summary", {}) or {}
        if not res_l.ok or not s_l.get("checkpoint_loaded"):
            problems.append(f"load run: {res_l.error or 'no Loaded checkpoint line'}")
            note = uninitialised_note(res_l.data.get("log_path"))
            if note:  # a resumed meta-init run skips init_weights: what the checkpoint does not hold stays unset
                problems.append(f"load run: uninitialised storage at the first forward: {note}")
            last = res_l if not res_l.ok else res
        elif (s_l.get("last_iteration") or 0) != iters + 2 or (s_l.get("steps") or 0) != 2:
            problems.append(f"resume did not continue at iteration {iters + 1}: ran {s_l.get('steps')} steps, "
                            f"last {s_l.get('last_iteration')}")
    return _record("G5", problems, evidence,
                   f"same seed → same first {n} losses; G4's DCP save at {iters} → resumed to {iters + 2}", last,
                   launches)


def gate_distributed(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    nproc = max(2, deps.spec.launch.nproc_per_node)
    overrides = {"training": {"train_iters": deps.spec.launch.gate_train_iters, "save_interval": 100000}}
    res, ev, losses = run_launch(deps, state, "G6", f"{nproc}-ranks", nproc, overrides)
    problems = training_problems(res, losses, f"{nproc} ranks")
    s = res.data.get("summary", {}) or {}
    mbs = 1
    gbs = s.get("global_batch_size")
    if not problems and gbs is not None and gbs < mbs * nproc:
        problems.append(f"global batch size {gbs} < {nproc} ranks × micro batch: ranks did not form one DP group")
    evidence, parity = [ev], None
    training = None
    if not problems:  # sharded parity: the first step's loss against one process on the same global batch
        ev_p, found, parity = sharded_parity_check(deps, res.data.get("config_path"), nproc, losses)
        evidence.append(ev_p)
        problems += found
    if not problems:  # K steps sharded over the ranks against the single-process source (G4's check, N ranks)
        # gating: both real-MindSpeed-MM readings that once differed were the harness, not the framework (the
        # probe's optimizer built over FSDP2's unsharded root parameters; the probes' rank setup skipping the CPU
        # patches on a CUDA build of torch without a GPU, so gloo summed where FSDP2 asks for the mean)
        g4 = next((e for e in state["gates"].get("G4", {}).get("evidence", []) if e["metrics"].get("losses")), None)
        work = {k: max(filter(None, (w.get(k) for w in (measured_work(ev), measured_work(g4)))), default=None)
                for k in ("step_s", "setup_s")}  # the slower of the N-rank launch and G4's one process
        ev_t, found, training = training_parity_check(deps, state, nproc=nproc, **work)
        evidence.append(ev_t)
        problems += [p.replace("training parity:", f"training parity ({nproc} ranks):", 1) for p in found]
    record = _record("G6", problems, evidence, f"{nproc} ranks ({res.data.get('device')}), {s.get('steps')} steps, "
                     f"global batch {gbs}, loss {s.get('first_loss')} → {s.get('last_loss')}; sharded parity "
                     f"{parity_summary(parity)}; {nproc}-rank training parity {parity_summary(training)}", res,
                     0 if res.data.get("reused") else 1)
    record["parity"] = {k: v for k, v in (("sharded", parity), ("training", training)) if v}
    return record
