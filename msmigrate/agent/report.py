"""``verification_report.md`` + ``evidence.json`` + ``loss_curve.png``: what the run proved, with the evidence."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from msmigrate.agent.exit_line import ALL_GATES, STALE, headline, todo_for
from msmigrate.agent.gate_currency import gate_currency
from msmigrate.agent.routes.fsdp2.delivery_review import review_delivery, review_section
from msmigrate.agent.report_actions import next_actions, risks
from msmigrate.agent.routes.fsdp2.gates.hf_export import export_summary
from msmigrate.agent.routes.fsdp2.gates.parity import parity_summary
from msmigrate.agent.routes.megatron.report import GATE_TITLES as MEGATRON_GATE_TITLES, megatron_section
from msmigrate.agent.state import PHASE_GATES
from msmigrate.agent.throughput import throughput_lines, throughput_rows
from msmigrate.core.git import GitError, branch_exists, git_out, is_repo
from msmigrate.core.secret_mask import mask_text
from msmigrate.core.text_clip import clip

GATE_TITLES = {
    "G0": "precheck (paths, target shape, runtime)",
    "G1": "model (plugin imports, id registered, meta build, forward → finite loss)",
    "G2": "data (dataset registered, samples map, media resolve, batch keys ⊆ forward)",
    "G3": "config (schema, cross-references, pattern audit, not weakened)",
    "G4": "functional (single-process steps, finite non-constant loss; K steps match the source, loss falls)",
    "G5": "reliability (same seed → same losses; save → load round-trip)",
    "G6": "distributed end-to-end (≥ 2 ranks, the delivered launch config)",
}


def _losses(gates: dict[str, Any]) -> dict[str, tuple[list[int], list[float]]]:
    """Per launch: (iterations, losses) at the iteration numbers the launch logged. A resumed load run continues at
    G4's last iteration + 1; evidence without the numbers is placed so that it ends at its last iteration."""
    series = {}
    for name in ("G4", "G5", "G6"):
        for ev in gates.get(name, {}).get("evidence", []):
            metrics = ev.get("metrics") or {}
            losses = metrics.get("losses")
            if not losses:
                continue
            its = metrics.get("loss_iterations")
            if not its or len(its) != len(losses):
                last = metrics.get("last_iteration") or len(losses)
                its = list(range(last - len(losses) + 1, last + 1))
            series[f"{name} {ev.get('label', '')}".strip()] = (list(its), losses)
    return series


MARKERS = ("o", "s", "^", "D", "v", "x", "P", "*")
LINESTYLES = ("-", "--", ":", "-.")


def draw_losses(ax: Any, series: dict[str, tuple[list[int], list[float]]]) -> list[Any]:
    """One line per launch, each with its own marker and line style, marker sizes shrinking so a line drawn over an
    identical one (G5's same-seed repeat of G4 is identical by design) leaves the one below visible; a curve equal
    to one already drawn is also shifted a little sideways."""
    lines, drawn = [], []
    for k, (label, (its, losses)) in enumerate(series.items()):
        shift = 0.08 * sum(1 for d in drawn if d == (its, losses))
        drawn.append((its, losses))
        (line,) = ax.plot([i + shift for i in its], losses, marker=MARKERS[k % len(MARKERS)],
                          linestyle=LINESTYLES[k % len(LINESTYLES)], markersize=max(3.0, 8.0 - 1.2 * k),
                          markerfacecolor="none" if k % 2 else None, label=label)
        lines.append(line)
    return lines


def plot_losses(series: dict[str, tuple[list[int], list[float]]], path: Path) -> bool:
    if not series:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    draw_losses(ax, series)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("iteration")
    ax.set_ylabel("loss")
    ax.set_title("Training loss in gate launches")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def training_parity_record(gates: dict[str, Any]) -> dict[str, Any] | None:
    record = (gates.get("G4", {}).get("parity") or {}).get("training")
    return record if record and (record.get("source") or {}).get("loss") else None


def plot_training_parity(record: dict[str, Any] | None, path: Path) -> bool:
    """Source and migrated model over the parity steps, loss and global grad norm, in one PNG (the same line
    drawing as the launches' curve: identical curves stay visible)."""
    if not record:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    src, tgt = record["source"], record["target"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), dpi=100)
    for ax, key, label in ((axes[0], "loss", "loss"), (axes[1], "grad_norm", "global grad norm")):
        own = not str(record.get("source_step") or "").startswith("HF class loss")
        series = {"source (its training step)" if own else "source (HF class loss, AdamW)":
                  (list(range(1, len(src[key]) + 1)), src[key]),
                  "migrated (target trainer step)": (list(range(1, len(tgt[key]) + 1)), tgt[key])}
        draw_losses(ax, series)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("step")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    dtype = {"bfloat16": "bf16 compute, fp32 master weights"}.get(str(record.get("dtype")), "fp32")
    fig.suptitle(f"Training parity ({dtype}, CPU, same init, batches and optimizer)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def _training_parity_lines(record: dict[str, Any]) -> list[str]:
    tol = record.get("tolerance") or {}
    settings = record.get("settings") or {}
    src, tgt = record.get("source") or {}, record.get("target") or {}
    lines = ["", f"Training parity (G4): {parity_summary(record)}.",
             f"Source step: {record.get('source_step')}; optimizer settings from the delivered config: lr "
             f"{settings.get('lr')}, weight decay {settings.get('weight_decay')}, betas {settings.get('betas')}, eps "
             f"{settings.get('eps')}, clip_grad {settings.get('clip_grad')}, gradient accumulation "
             f"{settings.get('gradient_accumulation_steps')} (constant lr; set aside: "
             f"{settings.get('schedule_set_aside')}).",
             f"Tolerance ({tol.get('dtype')}): |Δloss| ≤ {tol.get('loss_rtol')}·max(1, |loss|), grad norm "
             f"{tol.get('grad_norm_rtol')} relative, step-1 gradient per group {tol.get('grad_rtol')} of its largest, "
             f"fixed-batch loss falls ≥ {tol.get('learn_fraction')}"
             + (f" or, where less, as much as the source's own (≥ {tol['learn_floor']})" if tol.get("learn_floor")
                else "") + ".", "",
             "| step | source loss | migrated loss | source grad norm | migrated grad norm |", "|---|---|---|---|---|"]
    for i, row in enumerate(zip(src.get("loss", []), tgt.get("loss", []), src.get("grad_norm", []),
                                tgt.get("grad_norm", [])), 1):
        lines.append(f"| {i} | " + " | ".join(f"{x:.7g}" for x in row) + " |")
    groups = record.get("grad_groups") or []
    if groups:
        lines += ["", "| parameter group (step 1) | parameters | without gradient | max rel Δgrad | norm ratio |",
                  "|---|---|---|---|---|"]
        lines += [f"| {g['group']} | {g['params']} | {g['no_grad']} | {g['max_rel_dgrad']:.2e} | "
                  f"{g['norm_ratio'] if g['norm_ratio'] is None else round(g['norm_ratio'], 6)} |" for g in groups]
    for problem in record.get("problems") or []:
        lines.append(f"- {problem}")
    return lines


def diff_summary(target: Path, base: str | None, branch: str) -> str:
    if not is_repo(target):
        return f"(diff unavailable: {target} is not a git work tree)"
    if base is None or not branch_exists(target, branch):
        return "(no edits recorded)"
    try:
        stat = git_out(target, "diff", "--stat", "--no-color", f"{base}..{branch}")
        log = git_out(target, "log", "--oneline", "--no-color", f"{base}..{branch}")
    except GitError as exc:
        return f"(diff unavailable: {exc})"
    stat, log = stat.rstrip("\n"), log.rstrip("\n")
    return f"{stat}\n\ncommits on {branch}:\n{log}" if stat else "(no changes)"


def gate_result(name: str, gates: dict[str, Any], history: list[dict[str, Any]],
                stale: dict[str, str] | None) -> tuple[str, dict[str, Any] | None, str]:
    """(result word, the record it is about, why it is stale or ""). A PASS only for a record that still proves the
    work branch (``stale``: gate -> why not, from ``gate_currency``; None when no branch was consulted); a record
    dropped because the branch or the launch changed under it (the history keeps it) reads "stale, re-run"."""
    rec = gates.get(name)
    if rec is None:
        earlier = next((r for r in reversed(history or []) if r.get("gate") == name), None)
        if earlier is not None and earlier.get("passed"):
            return STALE, earlier, "its proof was invalidated (the branch or the launch changed since)"
        return "not run", None, ""
    if rec.get("passed"):
        why = (stale or {}).get(name)
        return (STALE, rec, why) if why else ("PASS", rec, "")
    return ("NEEDS ACCELERATOR" if rec.get("needs_accelerator") else "FAIL"), rec, ""


def _gate_rows(gates: dict[str, Any], titles: dict[str, str] = GATE_TITLES, history: list | None = None,
               stale: dict[str, str] | None = None) -> list[str]:
    rows = ["| gate | what it proves | result | parity with the source | evidence |", "|---|---|---|---|---|"]
    for group in PHASE_GATES.values():
        for g in group:
            result, rec, why = gate_result(g, gates, history or [], stale)
            summary = (f"{why} — " if why else "") + (rec or {}).get("summary", "")
            summary = summary.replace("|", "\\|").replace("\n", " ")
            parity = "; ".join(f"{kind} {parity_summary(p)}" for kind, p in ((rec or {}).get("parity") or {}).items())
            parity = parity.replace("|", "\\|").replace("\n", " ") or "—"
            rows.append(f"| {g} | {titles[g]} | {result} | {parity} | {clip(summary, 300)} |")
    return rows


def _parity_section(gates: dict[str, Any]) -> list[str]:
    """The parity figures in full, and the decoded sample with its trained spans marked."""
    lines = []
    model = (gates.get("G1", {}).get("parity") or {}).get("model")
    if (model or {}).get("status") == "not_comparable" and (gates.get("G2", {}).get("parity") or {}).get("model"):
        lines += [f"G1's model parity was not comparable ({model.get('why_not')}); G2 ran it on its collated batch:"]
        model = gates["G2"]["parity"]["model"]
    if model:
        tol = model.get("tolerance") or {}
        lines += ["| path | loss | max abs Δlogit | abs Δloss |", "|---|---|---|---|",
                  f"| source class | {model.get('source_loss')} | — | — |"]
        for key, label in (("eager", "plugin, eager"), ("meta", "plugin, meta init + load")):
            fig = model.get(key) or {}
            lines.append(f"| {label} | {fig.get('loss')} | {fig.get('max_abs_dlogit')} | {fig.get('dloss')} |")
        lines += ["", f"Tolerance: max abs Δlogit ≤ {tol.get('max_abs_dlogit')}, abs Δloss ≤ {tol.get('dloss')} "
                  f"(fp32, CPU, batch from the {model.get('batch_source')})."]
    data = (gates.get("G2", {}).get("parity") or {}).get("data")
    if data:
        lines += ["", f"Data: {data.get('samples_compared')} samples, {data.get('tokens')} tokens: "
                  f"{data.get('trained')} trained, {data.get('masked')} masked, {data.get('media_tokens')} media "
                  f"(source processor {data.get('source_media_tokens')}, vision features in the forward "
                  f"{data.get('vision_features')}); prompt ids equal the source's: {data.get('prompt_match')}."]
        if data.get("decoded_sample"):
            lines += ["", "First sample as the target feeds it (trained tokens in ⟦ ⟧):", "", "```",
                      data["decoded_sample"], "```"]
    training = (gates.get("G4", {}).get("parity") or {}).get("training")
    if training:
        lines += (_training_parity_lines(training) if training_parity_record(gates) else
                  ["", f"Training parity (G4): {parity_summary(training)}."])
        if training_parity_record(gates):
            lines += ["", "![training parity](training_parity.png)"]
    real = (gates.get("G4", {}).get("parity") or {}).get("training_real_weights")
    if real:
        w = real.get("weights") if isinstance(real.get("weights"), dict) else {}
        kept = "".join(f" ({path}: its layers {layers}, one of each kind)"
                       for path, layers in (w.get("kept_layers") or {}).items())
        lines += ["", f"Training parity on the source's own checkpoint (G4), cut to {'' if kept else 'its first '}"
                  f"{real.get('layers_per_tower')} layers per tower{kept}, {w.get('tensors_loaded')} tensors read from "
                  f"{len(w.get('shards') or [])} shard(s) of `{w.get('folder')}`: {parity_summary(real)}."]
    export = gates.get("G4", {}).get("hf_export")
    if export:
        lines += ["", f"HF weights out (G4): {export_summary(export)}; folder `{export.get('export_dir')}` "
                  f"({', '.join(export.get('files') or [])}), from checkpoint `{export.get('checkpoint')}`; converter: "
                  f"{export.get('converter')}; source loss {export.get('source_loss')} vs trained target "
                  f"{export.get('target_loss')}."]
    sharded = (gates.get("G6", {}).get("parity") or {}).get("sharded")
    if sharded:
        lines += ["", f"Sharded: {parity_summary(sharded)}."]
    ranks = (gates.get("G6", {}).get("parity") or {}).get("training")
    if ranks:
        lines += ["", f"Training parity on {ranks.get('nproc')} ranks (G6): {parity_summary(ranks)}; "
                  f"{ranks.get('sharding')}."]
    return ["", "## Parity with the source", "", *lines] if lines else []


def render_report(state: dict[str, Any], diff: str, has_plot: bool, where: dict[str, Any] | None = None,
                  stale: dict[str, str] | None = None) -> str:
    """``where``: the branch, the user's checkout and the runs folder, for the next actions' commands. ``stale``:
    gate -> why its passed record no longer proves the work branch (``gate_currency``)."""
    gates = state.get("gates", {})
    plan = state.get("plan", {})
    c = state.get("counters", {})
    megatron = plan.get("backend") == "megatron"
    history = state.get("gate_history", [])
    lines = [
        # what, why, what to do
        headline(state, {g: gate_result(g, gates, history, stale) for g in ALL_GATES}, (where or {}).get("runs_dir")),
        "",
        f"# Verification report — {plan.get('model_id', state.get('run_id'))}",
        "",
        f"- run id: `{state.get('run_id')}`",
        f"- exit status: **{state.get('exit_status')}** — {state.get('exit_detail', '')}",
        f"- generated: {time.strftime('%Y-%m-%d %H:%M:%S')}",
        f"- policy steps: {int(c.get('policy_steps', 0))}, tool calls: {int(c.get('tool_calls', 0))}, "
        f"tokens: {int(c.get('tokens', 0))}, training launches: {int(c.get('launches', 0))}",
        "",
        "## Gates",
        "",
        *_gate_rows(gates, MEGATRON_GATE_TITLES if megatron else GATE_TITLES, history, stale),
        "",
        "Every PASS above is backed by the command, exit code, timestamps, log excerpt and parsed metrics in "
        "`evidence.json`.",
        "",
        "## Migration decisions",
        "",
    ]
    for key in ("backend", "route", "build_path", "model_id", "data_branch", "dataset_type", "template", "mm_plugin",
                "collator",
                "similar_case", "plugin_dir", "example_dir"):
        if key in plan:
            lines.append(f"- {key}: `{plan[key]}`")
    for reason in plan.get("reasons", []):
        lines.append(f"  - {reason}")
    for rev in plan.get("revisions", []):  # where the delivered migration differs from the first plan
        change = f"{rev['field']} {rev.get('from')} → {rev.get('to')}: " if rev.get("field") != "decision" else ""
        lines.append(f"- revised in phase {rev.get('phase')}: {change}{rev.get('why', '')}")
    lines += megatron_section(state) if megatron else []
    lines += _parity_section(gates)
    metrics = []
    for g in ("G4", "G5", "G6"):
        for ev in gates.get(g, {}).get("evidence", []):
            m = ev.get("metrics") or {}
            if "steps" in m:
                metrics.append(f"| {g} {ev.get('label', '')} | {m.get('steps')} | {m.get('first_loss')} | "
                               f"{m.get('last_loss')} | {m.get('median_step_ms')} | {m.get('samples_per_s')} | "
                               f"{m.get('weights') or ''} |")
    if metrics:
        lines += ["", "## Training metrics", "", "| launch | steps | first loss | last loss | median step ms | samples/s "
                  "| weights |", "|---|---|---|---|---|---|---|", *metrics]
        lines += throughput_lines(gates)
    jobs = [f"| {g} {ev.get('label', '')} | {ev['job_id']} | {ev.get('nodes')} | {ev.get('job_state')} | "
            f"{ev.get('exit_code')} |" for g in ("G4", "G5", "G6") for ev in gates.get(g, {}).get("evidence", [])
            if ev.get("job_id")]
    if jobs:  # launch.backend: slurm — which scheduler job proved what
        lines += ["", "## Scheduler jobs", "", "| launch | job id | nodes | end state | exit code |",
                  "|---|---|---|---|---|", *jobs]
    if has_plot:
        lines += ["", "![loss curve](loss_curve.png)"]
    lines += review_section(state.get("delivery_review"), plan.get("similar_case"))
    review_problems = [f"- Delivery review: {p}" for p in (state.get("delivery_review") or {}).get("problems", [])]
    lines += ["", "## Changes in the target", "", "```", diff, "```", "", "## Risks", "",
              *[r for r in risks(state, megatron) if not (review_problems and r.startswith("- None found"))],
              *review_problems, "", "## Next actions", "", *next_actions(state, where or {})]
    return "\n".join(lines) + "\n"


def _review(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    ctx = deps.ctx
    try:
        return review_delivery(ctx.target, state.get("artifacts", {}).get("base_commit"), ctx.work_branch,
                               plan=state["plan"], source=ctx.source, data_path=ctx.data_path,
                               run_id=str(state.get("run_id") or ctx.run_id))
    except (GitError, OSError) as exc:  # (core.git runs the git CLI: a failed command, or a folder gone)
        return {"problems": [], "skipped": f"the work branch cannot be read ({exc})"}


def write_artifacts(deps: Any, state: dict[str, Any]) -> dict[str, str]:
    run_dir: Path = deps.ctx.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    gates = state.get("gates", {})
    if (state.get("plan") or {}).get("config_path") and (state.get("plan") or {}).get("backend") != "megatron":
        state = {**state, "delivery_review": _review(deps, state)}
    currency = gate_currency(deps.ctx, state)
    stale = {g: why for g, why in currency.items() if why}
    evidence = {
        "run_id": state.get("run_id"),
        "exit_status": state.get("exit_status"),
        "exit_detail": state.get("exit_detail"),
        "exit_todo": state.get("exit_todo") or todo_for(state, str(run_dir.parent)),
        "plan": state.get("plan", {}),
        "work_branch": deps.ctx.work_branch,
        # per passed gate: "current" (its commit is on the branch and nothing it proved changed since) or why not
        "gate_currency": {g: why or "current" for g, why in currency.items()},
        "gates": gates,
        "gate_history": state.get("gate_history", []),
        "counters": state.get("counters", {}),
        "throughput": [{"launch": label, **figures} for label, figures in throughput_rows(gates)],
        **({"delivery_review": state["delivery_review"]} if "delivery_review" in state else {}),
    }
    (run_dir / "evidence.json").write_text(mask_text(json.dumps(evidence, indent=2, default=str)))
    has_plot = plot_losses(_losses(gates), run_dir / "loss_curve.png")
    has_parity_plot = plot_training_parity(training_parity_record(gates), run_dir / "training_parity.png")
    diff = diff_summary(deps.ctx.target, state.get("artifacts", {}).get("base_commit"), deps.ctx.work_branch)
    where = {"branch": deps.ctx.work_branch, "checkout": str(getattr(deps.ctx, "checkout", None) or deps.ctx.target),
             "runs_dir": str(run_dir.parent)}
    (run_dir / "verification_report.md").write_text(mask_text(render_report(state, diff, has_plot, where, stale)))
    out = dict(state.get("artifacts", {}))
    out.update(report=str(run_dir / "verification_report.md"), evidence=str(run_dir / "evidence.json"))
    if has_plot:
        out["loss_curve"] = str(run_dir / "loss_curve.png")
    if has_parity_plot:
        out["training_parity_curve"] = str(run_dir / "training_parity.png")
    return out
