"""G0 precheck + knowledge gate: check the inputs are what they claim to be, then write the three understanding
artifacts every later phase builds on (architecture_chain.md, contract_matrix.yaml, similar_case.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml

from msmigrate.agent.backend_route import MEGATRON, MEGATRON_ENTRY, choose_backend
from msmigrate.agent.deps import RunDeps
from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.agent.host_limits import limit_problems
from msmigrate.agent.input_checks import data_record_problems
from msmigrate.agent.routes.fsdp2.config_fit import has_experts
from msmigrate.agent.similar_case import rank_similar_cases, source_scale
from msmigrate.agent.state import EXIT_PRECHECK
from msmigrate.core.git import head_commit, is_dirty, is_repo
from msmigrate.tools.file_writer import target_commit
from msmigrate.tools.repo_reader import hf_summary, target_inventory
from msmigrate.tools.runtime import interpreter_problem, run_probe

TARGET_MARKERS = ("mindspeed_mm/fsdp/train/trainer.py", "mindspeed_mm/fsdp/utils/register.py",
                  "mindspeed_mm/fsdp/models/modelhub.py")
# the Megatron backend route: its entry point and the model it assembles
MEGATRON_MARKERS = (MEGATRON_ENTRY, "mindspeed_mm/models/vlm_model.py")


def route_markers(deps: RunDeps) -> tuple[tuple[str, ...], str]:
    """The files the chosen route needs in the target (the route is the plan's; the same evidence decides it)."""
    try:
        cfg = json.loads((deps.ctx.source / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cfg = {}
    if choose_backend(getattr(deps, "spec", None), cfg if isinstance(cfg, dict) else {}).backend == MEGATRON:
        return MEGATRON_MARKERS, "the Megatron backend route (pretrain_vlm.py)"
    return TARGET_MARKERS, "the FSDP2 route"


def checkpoint_safe(obj: Any) -> Any:
    """Values read from source files go into the checkpoint (msgpack): integers beyond 64 bits — e.g. tokenizers'
    ``model_max_length`` of 1e30 — become strings."""
    if isinstance(obj, dict):
        return {k: checkpoint_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [checkpoint_safe(v) for v in obj]
    if isinstance(obj, int) and not isinstance(obj, bool) and not -(2**63) <= obj < 2**63:
        return str(obj)
    return obj


def data_file_problems(path: Path) -> list[str]:
    """A sample-data file that cannot be read as records fails G0 with what is wrong, not later as a traceback in
    the data gate. JSON (a list of records) or JSON Lines (one record a line) — the two the HF-style loaders read."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [f"sample data {path} cannot be read: {exc}"]
    if not text.strip():
        return [f"sample data {path} is empty ({path.stat().st_size} bytes); ShareGPT-style JSON records expected"]
    try:
        records = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        try:
            records = [json.loads(ln) for ln in lines]
        except json.JSONDecodeError:
            return [f"sample data {path} is not JSON or JSON Lines: {exc.msg} at line {exc.lineno} column {exc.colno}"]
    if isinstance(records, dict):
        records = [records]
    if not isinstance(records, list) or not records or not all(isinstance(r, dict) for r in records):
        return [f"sample data {path} holds no records (expected a JSON list of objects, one conversation each)"]
    return []


SAMPLE_CHARS = 1200  # the first record as the data phase sees it: enough for a conversation's shape and keys


def data_sample(path: Path | None) -> dict[str, Any]:
    """The sample data as the data phase needs it first: where it is, how many records, which keys they use, and
    the first record itself (cut) — so the model maps ``attr`` from the data without a read_file round trip."""
    if path is None or not Path(path).is_file() or data_file_problems(Path(path)):
        return {}
    text = Path(path).read_text(encoding="utf-8")
    try:
        records = json.loads(text)
    except json.JSONDecodeError:
        records = [json.loads(ln) for ln in text.splitlines() if ln.strip()]
    records = [records] if isinstance(records, dict) else records
    first = json.dumps(records[0], ensure_ascii=False)
    return {"file": str(path), "records": len(records), "keys": sorted({k for r in records for k in r}),
            "first_record": first if len(first) <= SAMPLE_CHARS else first[:SAMPLE_CHARS] + " …(cut)"}


def precheck(deps: RunDeps) -> tuple[list[str], dict[str, Any]]:
    ctx = deps.ctx
    problems: list[str] = []
    facts: dict[str, Any] = {}
    if not (ctx.source / "config.json").is_file():
        problems.append(f"source {ctx.source} is not a Hugging Face model folder (no config.json)")
    if ctx.data_path is None or not Path(ctx.data_path).is_file():
        problems.append(f"sample data {ctx.data_path} not found (ShareGPT-style JSON expected)")
    else:
        # the file's shape first; then each record (a sample? its media there?), named by index
        found = data_file_problems(Path(ctx.data_path)) or data_record_problems(Path(ctx.data_path))
        problems += found
        facts["owners"] = {p: "data" for p in found}  # records that are there but unusable: the data's
    runtime = interpreter_problem(ctx.runtime_python)  # "no such interpreter", not a probe's exit 127 later
    if runtime:
        problems.append(runtime)
        facts.setdefault("owners", {})[runtime] = "environment"
    markers, route = route_markers(deps)
    for marker in markers:
        if not (ctx.target / marker).is_file():
            problems.append(f"target {ctx.target} lacks {marker}: not a MindSpeed-MM checkout with {route}")
    checkout = Path(ctx.checkout or ctx.target)
    if deps.worktree_error or ctx.checkout is None:
        problems.append(deps.worktree_error or f"target {checkout}: the run has no git worktree of its own")
    else:
        base = head_commit(ctx.target) if is_repo(ctx.target) and is_repo(checkout) else None
        if base is not None:
            facts["base_commit"] = base
            # the user's uncommitted changes are not part of the run (it starts from their committed HEAD)
            facts["target_dirty"] = is_dirty(checkout)
        else:
            problems.append(f"target {checkout} is not a git repository with a commit (edits are committed there; "
                            "make one with: git init && git add -A && git commit -m base)")
    if ctx.source.resolve() == checkout.resolve() or checkout.resolve() in ctx.source.resolve().parents:
        problems.append("source must not live inside the target")
    return problems, facts


def architecture_chain(src: dict[str, Any], plan_hint: dict[str, Any]) -> str:
    fwd = src.get("forward") or {}
    return "\n".join([
        f"# Architecture chain — {src.get('model_type')}",
        "",
        "## Source",
        f"- architectures: {src.get('architectures')}",
        f"- model_type: {src.get('model_type')}; sub-configs: {src.get('sub_configs')}",
        f"- custom code: {src.get('custom_code_files')} (trust_remote_code: {src.get('needs_trust_remote_code')})",
        f"- media tokens: {src.get('tokens', {}).get('media_tokens')}",
        f"- forward parameters: {fwd.get('params') or fwd.get('parameters')}",
        "",
        "## Target (plugin-style FSDP2 route)",
        "torchrun → mindspeed_mm/fsdp/train/trainer.py CONFIG.yaml → ConfigManager → import_plugin(training.plugin)",
        "→ ModelHub.build (model_register[model.model_id]) → features (recompute) → fully_shard(apply_modules)",
        "→ build_mm_dataset (data_register[dataset_type]) → template + mm_plugin → collator → model(**batch).loss",
        "",
        f"Most similar existing case: {plan_hint.get('similar_case')}",
    ]) + "\n"


def contract_matrix(ctx_name: str) -> dict[str, Any]:
    return {
        "model.model_id": "must equal the id in @model_register.register(...) inside a training.plugin path",
        "data.dataset_param.dataset_type": "must equal a @data_register.register(...) id inside a training.plugin path",
        "basic_parameters.template": "must be a name registered with _register_template (or chat_template file)",
        "collate_param.collator_id": "must be a DATA_COLLATOR key unless the dataset defines collate_fn",
        "training.plugin": [f"mindspeed_mm/fsdp/models/{ctx_name}", "mindspeed_mm/fsdp/data/datasets/huggingface"],
        "parallel.fsdp_plan.apply_modules": "every pattern matches ≥1 module of the built model (module_name_match)",
        "features.recompute_plan.apply_modules": "targets accept past_key_values (decoder layers / blocks)",
    }


def make_prepare_node(deps: RunDeps):
    def node(state: dict[str, Any]) -> dict[str, Any]:
        ctx = deps.ctx
        started = time.time()
        problems, facts = precheck(deps)
        src = hf_summary(ctx.source, runtime_python=ctx.runtime_python,
                         probe_timeout=ctx.probe_timeout_s) if not problems else None
        inv = target_inventory(ctx.target) if not problems else None
        env = run_probe(ctx.runtime_python, "env_probe", [str(ctx.target), "--runtime-python", str(ctx.runtime_python)],
                        timeout=ctx.probe_timeout_s) if not problems else None
        if src is not None and not src.ok:
            problems.append(f"source summary failed: {src.error}")
        if inv is not None and not inv.ok:
            problems.append(f"target inventory failed: {inv.error}")
        owners = facts.pop("owners", {})
        if env is not None and not env.ok:
            problems.append(f"target runtime probe failed: {env.error}")
            owners[problems[-1]] = "environment"
        elif env is not None:
            limits = limit_problems(env.data.get("result"))
            problems += limits
            owners.update({p: "environment" for p in limits})
        record = {
            "gate": "G0", "passed": not problems,
            "summary": "; ".join(problems) if problems else
            f"source {src.data.get('architectures')} ok; target has {len(inv.data.get('model_ids', {}))} model ids; "
            f"runtime {(env.data.get('result') or {}).get('device', {})}",
            "evidence": [evidence_item("precheck", [], 0 if not problems else 1, started, time.time(),
                                       "\n".join(problems), {"env": env.data.get("result") if env else None})],
            "failure_text": "\n".join(problems),
            # whose the first problem is where G0 knows it (the records: data; the runtime or host: environment); a
            # spec input (a path, the checkout) is the user's and no phase's: None
            "owner": owners.get(problems[0]) if problems else None,
            # the commit G0 found the target at (the run's base); None without a work tree of the run's own
            "target_commit": target_commit(ctx) if ctx.checkout is not None else None,
        }
        deps.trajectory.append("gate", phase="prepare", **record)
        if problems:
            return {"gates": {"G0": record}, "gate_history": [record], "phase": "report",
                    "exit_status": EXIT_PRECHECK, "exit_detail": problems[0]}
        ranked = rank_similar_cases(src.data, inv.data,
                                    source_scale(ctx.source, has_experts({}, ctx.source)))
        out = ctx.run_dir
        (out / "architecture_chain.md").write_text(architecture_chain(src.data, {"similar_case": ranked[:1]}))
        (out / "contract_matrix.yaml").write_text(yaml.safe_dump(contract_matrix(ctx.model_name), sort_keys=False))
        lines = ["# Similar cases (most similar first)", ""]
        lines += [f"- `{c['example']}` score {c['score']}: {', '.join(c['why'])}"
                  + (f" (ties: {c['tie_break']})" if c.get("tie_break") else "") for c in ranked[:5]]
        (out / "similar_case.md").write_text("\n".join(lines) + "\n")
        artifacts = {**state.get("artifacts", {}), **{k: str(v) for k, v in facts.items()},
                     "architecture_chain": str(out / "architecture_chain.md"),
                     "contract_matrix": str(out / "contract_matrix.yaml"), "similar_case": str(out / "similar_case.md")}
        return {"gates": {"G0": record}, "gate_history": [record], "phase": "plan", "artifacts": artifacts,
                "source_summary": checkpoint_safe({**src.data, "data_sample": data_sample(ctx.data_path)}),
                "target_summary": checkpoint_safe({**inv.data, "similar_cases": ranked[:5]}),
                "runtime": checkpoint_safe(env.data.get("result", {}))}

    return node
