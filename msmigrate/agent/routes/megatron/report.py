"""The Megatron route's part of ``verification_report.md``: the route and why, the components reused by
``model_id`` (or needed), the parallel sizes and what they came to, the files delivered, and exactly what this
run could not prove or failed — every gate that needs an accelerator says so in its record, and those lines are
listed with every gate that failed — and the exact weight conversion command the launch script's ``--load``
needs (G3's record); where G4's CPU preflight ran that conversion for one rank (a real checkout whose runtime builds
the model here), what it ran and changed."""

from __future__ import annotations

from typing import Any

# what each gate slot proves on the Megatron route (the gates themselves say what they ran)
GATE_TITLES = {
    "G0": "precheck (paths, target has pretrain_vlm.py + the VLM assembly, runtime)",
    "G1": "model (route modules import, components registered by model_id, converter round trip HF → MM → HF)",
    "G2": "data (data JSON: dataset registered, samples and processor resolve, get_batch fields ⊆ forward)",
    "G3": "config (model JSON + launch script: flags defined by the framework, TP/PP/CP/VPP fit the model)",
    "G4": "functional training (pretrain_vlm.py steps; accelerator)",
    "G5": "reliability (same seed → same losses, checkpoint round trip; accelerator)",
    "G6": "distributed end-to-end (the delivered launch script with its TP/PP; accelerator)",
}
# what no CPU gate of this route can show, whatever passed (stated, not inferred)
NOT_PROVABLE_ON_CPU = (
    "tensor- and pipeline-parallel execution of the delivered sizes (TP all-reduce, PP send/recv, the 1F1B / "
    "interleaved schedule) — it needs megatron-core with an accelerator backend",
    "that the converted weights train: loss values of pretrain_vlm.py on the real checkpoint",
    "that the converted shards load into the model at the spec's TP/PP (G1 round-trips the converter's split of a "
    "tiny model at those sizes; loading them needs the model built on an accelerator)",
    "fused kernels, flash attention and throughput of the launch script's flags",
)
# what G4's CPU launches of pretrain_vlm.py (TP 1 and 2, the converted weights) do show, when they passed
TRAINED_ON_CPU = (NOT_PROVABLE_ON_CPU[1],)


def megatron_section(state: dict[str, Any]) -> list[str]:
    plan, gates = state.get("plan") or {}, state.get("gates") or {}
    lines = ["", "## Megatron route", "", f"- entry point: `{plan.get('entry')}` (training on an accelerator)"]
    par = plan.get("parallel") or {}
    facts = ((plan.get("parallel_check") or {}).get("facts")) or {}
    lines.append(f"- parallel sizes: tp {par.get('tp')}, pp {par.get('pp')}, cp {par.get('cp')}, vpp {par.get('vpp')}"
                 + (f" — model: {facts.get('num_attention_heads')} heads, {facts.get('num_key_value_heads')} KV "
                    f"heads, {facts.get('num_hidden_layers')} layers" if facts else ""))
    new = plan.get("new_component") or {}
    for role, m in (plan.get("components") or {}).items():
        made = {"vision_encoder": new, "vision_projector": plan.get("new_projector") or {}}.get(role) or {}
        if made.get("model_id") and m.get("model_id") == made["model_id"]:
            lines.append(f"- {role}: **new** `{made['model_id']}` registered by this run ({made['class_name']} in "
                         f"`{made['module_path']}`; entries in {', '.join(f'`{p}`' for p in made.get('edits') or {})})"
                         f" — {m.get('why', '')}")
            continue
        lines.append(f"- {role}: " + (f"reuse `{m['model_id']}`" if m.get("model_id") else "**new component "
                                      "needed**") + f" — {m.get('why', '')}")
    for key in ("model_json_path", "data_json_path", "script_path", "converter", "converter_output"):
        if plan.get(key):
            lines.append(f"- {key.replace('_', ' ')}: `{plan[key]}`")
    contract = plan.get("batch_contract") or {}
    if contract.get("consumed") is not None:
        lines.append(f"- get_batch → {contract.get('forward')}: consumes {contract['consumed']}"
                     + (f"; no parameter for {contract['not_consumed']}" if contract.get("not_consumed") else ""))
    conv = (gates.get("G3") or {}).get("conversion") or {}
    if conv.get("command"):
        lines.append(f"- weight conversion (the script's `--load {conv.get('mm_dir')}`): `{conv['command']}`")
    pre = (gates.get("G4") or {}).get("cpu_preflight") or {}
    ran = pre.get("conversion_run") or {}
    if pre:
        lines.append(f"- CPU preflight on the real framework (G4): {pre.get('summary', '')}")
    launches = (gates.get("G4") or {}).get("cpu_launches") or []
    if launches:
        lines.append("- CPU training on the real framework (G4): torchrun pretrain_vlm.py under msmigrate's CPU shim, "
                     "the delivered model JSON, data JSON and converted weights: " + "; ".join(
                         f"TP={r['tp']} on {r['ranks']} gloo rank(s): "
                         + (f"loss {r['losses'][0][1]:.4f} → {r['losses'][-1][1]:.4f} over {len(r['losses'])} "
                            "iterations" if r.get("ok") else "failed: " + "; ".join(r.get("problems") or [])[:300])
                         for r in launches)
                     + "; changed from the delivered script: " + ", ".join(
                         f"{k} {v[0]} → {v[1]}" for k, v in (launches[0].get("changed") or {}).items()
                         if k not in ("--load", "--save")))
    passed = [g for g in sorted(gates) if gates[g].get("passed")]
    lines += ["", f"Gates passed on this machine: {', '.join(passed) or 'none'}.", "",
              "What this run could not prove, or failed:"]
    for g in sorted(gates):
        why = gates[g].get("needs_accelerator")
        if why:
            lines.append(f"- {g}: {why if isinstance(why, str) else gates[g].get('summary', '')}")
        elif not gates[g].get("passed"):
            lines.append(f"- {g} failed: {gates[g].get('summary', '')}")
    if conv.get("command") and ran.get("ok"):
        lines.append(f"- the converted weights at `{conv.get('mm_dir')}`: G4 ran this conversion on the source's "
                     f"weights for one rank only (`{ran.get('command')}`; changed: "
                     + ", ".join(f"{k} {v[0]} → {v[1]}" for k, v in (ran.get("changed") or {}).items())
                     + f"); the launch's shards are not written: before launching, run exactly: `{conv['command']}`")
    elif conv.get("command"):
        lines.append(f"- the converted weights at `{conv.get('mm_dir')}`: no gate of this run converted the "
                     "source's checkpoint (G1 ran the same converter on the source's config shrunk to 2 layers per "
                     f"stack, at the launch's TP/PP); before launching, run exactly: `{conv['command']}`")
    elif conv.get("error") and plan.get("converter"):
        lines.append(f"- the weight conversion command: {conv['error']}")
    if not plan.get("converter"):
        lines.append(f"- the weights in the Megatron layout: the target has no converter for model_type "
                     f"{plan.get('model_type')!r} (G1 checked msmigrate's layout convention only); one must be "
                     "written before training on the real checkpoint")
    g1 = gates.get("G1") or {}
    if new.get("model_id") and g1.get("encoder_converter_used"):
        dropped = g1.get("encoder_unmapped_hf") or []
        lines.append(f"- the new `{new['model_id']}`'s weights: G1 converted the source's tower with msmigrate's "
                     f"converter derived from the class's state_dict ({g1['encoder_converter_used']}; strict load, "
                     "HF → MM → HF identical), but not the target's own converter, and the rest of the model "
                     "(projector, decoder) still needs the converter above"
                     + (f"; {len(dropped)} source tensor(s) have no place in the class and are dropped: "
                        + ", ".join(f"`{n}`" for n in dropped[:8]) + (" …" if len(dropped) > 8 else "")
                        if dropped else ""))
    if new.get("model_id"):
        lines.append(f"- that the new `{new['model_id']}` computes what the source's tower computes: not built "
                     "from the weights — " + "; ".join(new.get("not_built") or []))
    proj = plan.get("new_projector") or {}
    if proj.get("model_id"):
        lines.append(f"- that the new `{proj['model_id']}` computes what the source's projector computes: G1 "
                     + (f"converted its weights ({g1['projector_converter_used']}; strict load, HF → MM → HF "
                        "identical) and " if g1.get("projector_converter_used") else "")
                     + "ran it behind the encoder on random weights only; not built from the weights — "
                     + ("; ".join(proj.get("not_built") or []) or "nothing named"))
    trained = bool(launches) and all(r.get("ok") for r in launches)
    lines += [f"- {text}" for text in NOT_PROVABLE_ON_CPU if not (trained and text in TRAINED_ON_CPU)]
    if trained:
        lines.append("- the loss at the delivered learning rate, batch and sizes over a real run (the CPU launches "
                     "ran a few iterations at TP 1 and 2 with the changes above)")
    return lines
