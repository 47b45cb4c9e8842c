"""``verification_report.md`` + ``evidence.json`` + ``loss_curve.png``: what the run proved, with the evidence."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import git

from msmigrate.agent.report_actions import next_actions, risks
from msmigrate.agent.routes.fsdp2.gates.parity import parity_summary
from msmigrate.agent.routes.megatron.report import GATE_TITLES as MEGATRON_GATE_TITLES, megatron_section
from msmigrate.agent.state import EXIT_UNSUPPORTED, PHASE_GATES
from msmigrate.core.secret_mask import mask_text
from msmigrate.core.text_clip import clip

GATE_TITLES = {
    "G0": "precheck (paths, target shape, runtime)",
    "G1": "model (plugin imports, id registered, meta build, forward → finite loss)",
    "G2": "data (dataset registered, samples map, media resolve, batch keys ⊆ forward)",
    "G3": "config (schema, cross-references, pattern audit, not weakened)",
    "G4": "functional (single-process steps, finite non-constant loss)",
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


def diff_summary(target: Path, base: str | None, branch: str) -> str:
    try:
        repo = git.Repo(target)
        if base is None or branch not in [h.name for h in repo.heads]:
            return "(no edits recorded)"
        stat = repo.git.diff("--stat", f"{base}..{branch}")
        log = repo.git.log("--oneline", f"{base}..{branch}")
        return f"{stat}\n\ncommits on {branch}:\n{log}" if stat else "(no changes)"
    except (git.GitCommandError, git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
        return f"(diff unavailable: {exc})"


def _gate_rows(gates: dict[str, Any], titles: dict[str, str] = GATE_TITLES) -> list[str]:
    rows = ["| gate | what it proves | result | parity with the source | evidence |", "|---|---|---|---|---|"]
    for group in PHASE_GATES.values():
        for g in group:
            rec = gates.get(g)
            result = "not run" if rec is None else ("PASS" if rec.get("passed") else
                                                    "NEEDS ACCELERATOR" if rec.get("needs_accelerator") else "FAIL")
            summary = (rec or {}).get("summary", "").replace("|", "\\|").replace("\n", " ")
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
    sharded = (gates.get("G6", {}).get("parity") or {}).get("sharded")
    if sharded:
        lines += ["", f"Sharded: {parity_summary(sharded)}."]
    return ["", "## Parity with the source", "", *lines] if lines else []


def render_report(state: dict[str, Any], diff: str, has_plot: bool, where: dict[str, Any] | None = None) -> str:
    """``where``: the branch, the user's checkout and the runs folder, for the next actions' commands."""
    gates = state.get("gates", {})
    plan = state.get("plan", {})
    c = state.get("counters", {})
    megatron = plan.get("backend") == "megatron"
    # a policy that could not do a phase says so on the first line: what, why, what to do
    head = ([f"**{EXIT_UNSUPPORTED}** — {state.get('exit_detail', '')}", ""]
            if state.get("exit_status") == EXIT_UNSUPPORTED else [])
    lines = [
        *head,
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
        *_gate_rows(gates, MEGATRON_GATE_TITLES if megatron else GATE_TITLES),
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
                               f"{m.get('last_loss')} | {m.get('median_step_ms')} | {m.get('samples_per_s')} |")
    if metrics:
        lines += ["", "## Training metrics", "", "| launch | steps | first loss | last loss | median step ms | samples/s |",
                  "|---|---|---|---|---|---|", *metrics]
    jobs = [f"| {g} {ev.get('label', '')} | {ev['job_id']} | {ev.get('nodes')} | {ev.get('job_state')} | "
            f"{ev.get('exit_code')} |" for g in ("G4", "G5", "G6") for ev in gates.get(g, {}).get("evidence", [])
            if ev.get("job_id")]
    if jobs:  # launch.backend: slurm — which scheduler job proved what
        lines += ["", "## Scheduler jobs", "", "| launch | job id | nodes | end state | exit code |",
                  "|---|---|---|---|---|", *jobs]
    if has_plot:
        lines += ["", "![loss curve](loss_curve.png)"]
    lines += ["", "## Changes in the target", "", "```", diff, "```", "", "## Risks", "", *risks(state, megatron),
              "", "## Next actions", "", *next_actions(state, where or {})]
    return "\n".join(lines) + "\n"


def write_artifacts(deps: Any, state: dict[str, Any]) -> dict[str, str]:
    run_dir: Path = deps.ctx.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    gates = state.get("gates", {})
    evidence = {
        "run_id": state.get("run_id"),
        "exit_status": state.get("exit_status"),
        "exit_detail": state.get("exit_detail"),
        "plan": state.get("plan", {}),
        "gates": gates,
        "gate_history": state.get("gate_history", []),
        "counters": state.get("counters", {}),
    }
    (run_dir / "evidence.json").write_text(mask_text(json.dumps(evidence, indent=2, default=str)))
    has_plot = plot_losses(_losses(gates), run_dir / "loss_curve.png")
    diff = diff_summary(deps.ctx.target, state.get("artifacts", {}).get("base_commit"), deps.ctx.work_branch)
    where = {"branch": deps.ctx.work_branch, "checkout": str(deps.ctx.checkout or deps.ctx.target),
             "runs_dir": str(run_dir.parent)}
    (run_dir / "verification_report.md").write_text(mask_text(render_report(state, diff, has_plot, where)))
    out = dict(state.get("artifacts", {}))
    out.update(report=str(run_dir / "verification_report.md"), evidence=str(run_dir / "evidence.json"))
    if has_plot:
        out["loss_curve"] = str(run_dir / "loss_curve.png")
    return out
