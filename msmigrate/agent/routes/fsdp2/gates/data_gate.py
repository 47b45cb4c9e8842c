"""G2 data: the registered ``dataset_type`` maps the real sample JSON through ``attr``, media paths resolve, the
template + mm_plugin + collator produce a batch, and that batch — real data — goes through the plugin's forward to a
finite loss (which is what "batch keys ⊆ forward signature" has to mean for forwards that take ``**kwargs``); and data
parity (``gates/parity.py``): the mapped samples against the source's own chat template + processor, the batch's
media tokens against the vision features the forward consumes. The samples collated once must read the same from the
dataset afterwards: the trainer draws each again in the next epoch (``tools/probes/_redraw.py``). Last, where G1's
model parity was not comparable because the source's forward requires inputs G1's batch lacks (media, for a
bare-tokenizer source), the same model parity on this gate's collated batch (``parity["model"]``): the first batch
that can feed both forwards. And every output the source's processor makes with an image that this real batch does
not carry, where G1 did not examine it (G1 checks the plan's list of dropped outputs), gets G1's check: the source's
forward on its own batch without it must give the same loss and logits (``parity["dropped"]``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from msmigrate.agent.routes.fsdp2.cutoff_size import CUTOFF_PATH
from msmigrate.agent.routes.fsdp2.draft_config import draft_config, load_baseline
from msmigrate.agent.routes.fsdp2.gates.bound_inputs import bound_config
from msmigrate.agent.routes.fsdp2.gates.data_settings import settings_check
from msmigrate.tools import yaml_roundtrip as rt
from msmigrate.agent.gates.evidence import evidence_item, probe_runtime
from msmigrate.agent.routes.fsdp2.gates.model_gate import fresh_untrained
from msmigrate.agent.routes.fsdp2.gates.parity import (data_parity_record, model_parity_check, needs_collated_batch,
                                                       parity_summary, plugin_rejections)
from msmigrate.tools.media_expansion import TEXT_KEYS
from msmigrate.tools.target_checks import data_check, forward_check


def config_for_data(deps: Any, state: dict[str, Any]) -> Path:
    """The delivered YAML when the config phase has written it, else a draft from the plan (data section only)."""
    plan, ctx = state["plan"], deps.ctx
    delivered = ctx.target / plan["config_path"]
    if delivered.is_file():
        return bound_config(deps, delivered)
    baseline, _, _ = load_baseline(ctx.target, plan["similar_case"])
    cfg = draft_config(plan, baseline, source=ctx.source, data_json=ctx.data_path, tree={})
    path = ctx.run_dir / "probes" / "g2_draft_config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(rt.dump(cfg))
    return path


DELIVERED_KEYS = (("dataset_type", ("data", "dataset_param", "dataset_type")),
                  ("template", ("data", "dataset_param", "basic_parameters", "template")),
                  ("collator", ("data", "dataloader_param", "collate_param", "collator_id")))


def delivered_via(config: Path, plan: dict[str, Any]) -> str:
    """``dataset_type/template/collator`` as the YAML this gate checked names them — what was delivered, not what
    the plan first said (live run 8 delivered dataset_type internvl_chat and G2 said "via huggingface"); a field the
    YAML leaves out falls back to the plan's, and each one that differs from the plan says so."""
    try:
        cfg = yaml.safe_load(Path(config).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        cfg = {}
    parts, differs = [], []
    for key, path in DELIVERED_KEYS:
        node: Any = cfg
        for step in path:
            node = node.get(step) if isinstance(node, dict) else None
        value = node if isinstance(node, str) and node else plan.get(key)
        parts.append(str(value))
        if plan.get(key) and value != plan.get(key):
            differs.append(f"{key} {value} where the plan said {plan[key]}")
    return "/".join(parts) + (f" (delivered: {'; '.join(differs)})" if differs else "")


def cutoff_findings(cutoff: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Samples whose media tokens ``cutoff_len`` cuts (the probe's numbers; see tools/probes/_cutoff.py), as one
    finding that carries the smallest cutoff_len that cuts none of them (``minimum``: the repair sets it as data)."""
    cut = (cutoff or {}).get("cut") or []
    if not cut:
        return []
    need = max(c["full_length"] for c in cut)
    shown = "; ".join(f"sample {c['sample']} keeps {c['kept']} of its {c['full']} media tokens "
                      f"({c['full_length']} tokens in full)" for c in cut[:5])
    return [{"severity": "error", "code": "cutoff-cuts-media", "path": CUTOFF_PATH, "value": cutoff["cutoff_len"],
             "minimum": need,
             "message": f"cutoff_len {cutoff['cutoff_len']} cuts the media tokens of {len(cut)} of "
                        f"{cutoff.get('checked')} samples with media: {shown}; raise {CUTOFF_PATH} to at least {need}"}]


def cutoff_problems(cutoff: dict[str, Any] | None) -> list[str]:
    return [f["message"] for f in cutoff_findings(cutoff)]


def collator_place(plan: dict[str, Any], inventory: dict[str, Any] | None) -> str:
    """``qwen3vl (defined in path)``: the plan's collator id and the file the target registers it in (the classify
    node places a batch the collator made wrong in that file of the run); the id alone when the inventory lacks it."""
    ident = plan.get("collator") or "collate_param.collator_id"
    entry = next((e for e in (inventory or {}).get("collators") or [] if isinstance(e, dict) and e.get("id") == ident
                  and str(e.get("file", "")).endswith(".py")), None)
    return f"{ident} (defined in {entry['file']})" if entry else str(ident)


def missing_batch_keys(plan: dict[str, Any], batch_keys: Any, forward_params: Any,
                       inventory: dict[str, Any] | None = None) -> list[str]:
    """Inputs the source's processor makes with an image and the forward names, that the plan's data contract
    routes to the batch, yet the collated batch lacks. A forward that takes ``**kwargs`` runs to a finite loss on
    such a batch (the input defaults to None: no attention mask, no media), so the finite loss alone does not show
    it; a key the collator renamed is then in the batch under a name the forward does not read."""
    if not isinstance(batch_keys, dict) or not forward_params:
        return []
    made = set((plan.get("media_expansion") or {}).get("keys_with_image") or [])
    contract = plan.get("data_contract") or {}
    routed = [k for k in TEXT_KEYS if k != "labels" and k in made] + list(contract.get("mm_input_keys") or [])
    missing = [k for k in dict.fromkeys(routed) if k in forward_params and k not in batch_keys]
    if not missing:
        return []
    unread = sorted(k for k in batch_keys if k not in forward_params)
    also = (f"; the batch carries {', '.join(unread)}, which the forward does not name (its **kwargs takes "
            f"{'it' if len(unread) == 1 else 'them'} and nothing reads {'it' if len(unread) == 1 else 'them'})"
            if unread else "")
    return [f"the collated batch lacks {', '.join(missing)}, which the source processor makes and the forward "
            f"takes: the collator ({collator_place(plan, inventory)}) does not put "
            f"{'it' if len(missing) == 1 else 'them'} in the batch{also}"]


def unexamined_drops(plan: dict[str, Any], batch_keys: Any, g1_model: dict[str, Any] | None) -> list[str]:
    """Outputs the source's processor makes with an image that the collated batch does not carry and G1's
    dropped-output check did not examine: what the target trains without, measured on the real batch rather than
    read from the plan's contract (a collator that loses a key the contract routes, or a key no rule names)."""
    if not isinstance(batch_keys, dict):
        return []
    made = (plan.get("media_expansion") or {}).get("keys_with_image") or []
    examined = {d.get("key") for d in (g1_model or {}).get("dropped_outputs") or [] if d.get("examined")}
    return sorted(k for k in made if k != "labels" and k not in batch_keys and k not in examined)


def gate_data(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    plan, ctx = state["plan"], deps.ctx
    evidence, problems, parity, findings = [], [], None, []
    config = config_for_data(deps, state)
    t0 = time.time()
    media_id = (plan.get("media_expansion") or {}).get("media_token_id")
    custom = plan["route"] == "custom"
    res = data_check(ctx, config, parity_data=ctx.data_path, media_token_id=media_id, trust_remote_code=custom,
                     source_training=plan.get("source_training"))
    r = res.data.get("result") or {}
    evidence.append(evidence_item("dataset → collator", res.data.get("argv", []), res.data.get("returncode"), t0,
                                  time.time(), res.data.get("stderr_tail", "") if not res.ok else "",
                                  {"num_samples": r.get("num_samples"), "batch_keys": r.get("batch_keys"),
                                   "media": r.get("media"), "cutoff": r.get("cutoff"), "redraw": r.get("redraw")},
                                  config=str(config), **probe_runtime(res)))
    if not res.ok:
        problems.append(f"data pipeline failed: {res.error}")
    else:
        findings = cutoff_findings(r.get("cutoff"))
        problems += [f["message"] for f in findings]
        # a sample the collation changed in the dataset: the next epoch trains on another batch (probes/_redraw.py)
        problems += (r.get("redraw") or {}).get("problems") or []
        # no media id in the plan (a source processor that does not expand media): the one data parity read from
        # the target's media spans, so the forward still counts the vision features against those tokens
        media_id = media_id if media_id is not None else (r.get("parity") or {}).get("media_token_id")
        t1 = time.time()
        fwd = forward_check(ctx, plugins=[plan["plugin_dir"]], model_id=plan["model_id"],
                            batch_file=r.get("batch_file"), trust_remote_code=custom, media_token_id=media_id,
                            fresh_untrained=fresh_untrained(ctx, plan))
        f = fwd.data.get("result") or {}
        evidence.append(evidence_item("forward on the collated batch", fwd.data.get("argv", []),
                                      fwd.data.get("returncode"), t1, time.time(),
                                      fwd.data.get("stderr_tail", "") if not fwd.ok else "",
                                      {"loss": f.get("loss"), "finite": f.get("finite"),
                                       "forward_params": f.get("forward_params")}, **probe_runtime(fwd)))
        # a key the batch lacks first: where the forward then rejects the batch, that is why (its params are
        # reported even when it fails)
        problems += missing_batch_keys(plan, r.get("batch_keys"), f.get("forward_params"), state.get("target_summary"))
        if not fwd.ok:
            problems.append(f"the model rejects the collated batch: {fwd.error}")
            if r.get("batch_file"):
                # the source is the oracle: does its own model take this batch? Then the plugin is what rejects it
                ev, found, _ = model_parity_check(deps, state, batch_file=r["batch_file"], media_token_id=media_id)
                evidence.append(ev)
                problems += plugin_rejections(found)
        t2 = time.time()
        found, parity = data_parity_record(r, f)
        evidence.append(evidence_item("data parity (target pipeline vs source processor)", res.data.get("argv", []),
                                      res.data.get("returncode"), t2, time.time(), "", parity))
        problems += found
    model = None
    g1_model = ((state.get("gates") or {}).get("G1", {}).get("parity") or {}).get("model")
    if not problems and needs_collated_batch(g1_model) and r.get("batch_file"):
        # G1 could not feed the source's forward (it requires media a bare-tokenizer source's synthetic batch lacks):
        # the same model parity on this gate's batch, so a plugin init/forward bug fails here, before any training
        # launch, as a model-parity failure (owner: model) rather than a NaN loss at G4
        ev, found, model = model_parity_check(deps, state, batch_file=r["batch_file"], media_token_id=media_id)
        evidence.append(ev)
        problems += found
    unexamined = unexamined_drops(plan, r.get("batch_keys"), g1_model) if res.ok else []
    dropped = None
    if unexamined:
        ev, found, dropped = model_parity_check(deps, state, dropped_keys=unexamined)
        evidence.append(ev)
        problems += [f"{p} (an output the collated batch does not carry)" for p in found]
    settings = {}
    if not res.ok or data_parity_record(r, None)[0]:
        # the data check itself failed: would it pass with the YAML's data settings as this migration derives them?
        def passes(path: Path) -> bool:
            again = data_check(ctx, path, parity_data=ctx.data_path, media_token_id=media_id, trust_remote_code=custom,
                               source_training=plan.get("source_training"), name="data_check_as_derived")
            return again.ok and not data_parity_record(again.data.get("result") or {}, None)[0]

        settings = settings_check(deps, state, config, passes)
        problems = (settings.get("problems") or []) + problems
    failure = "\n".join(problems + [e["log_excerpt"] for e in evidence if e["log_excerpt"]])
    ok = (f"{r.get('num_samples')} samples via {delivered_via(config, plan)}; batch keys "
          f"{sorted((r.get('batch_keys') or {}).keys())}; forward loss {evidence[1]['metrics'].get('loss')}; "
          f"data parity {parity_summary(parity)}" if len(evidence) > 2 else "")
    if ok and model:
        ok += f"; model parity on this batch (G1's was not comparable) {parity_summary(model)}"
    records = {**({"data": parity} if parity else {}), **({"model": model} if model else {}),
               **({"dropped": dropped} if dropped else {})}
    return {"gate": "G2", "passed": not problems, "summary": "; ".join(problems) or ok, "evidence": evidence,
            "failure_text": failure, "parity": records, "findings": findings,
            **({"data_settings": {k: v for k, v in settings.items() if k != "problems"}} if settings else {})}
