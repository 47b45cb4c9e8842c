"""The delivered YAML's optimizer settings set against the source's own recipe (``tools/repo_reader/
training_recipe.py``: the source's launch flags, its training code, else the HF Trainer's defaults). The gates' own
launches use the delivered settings on both sides of their comparisons (G4's training parity steps the source and
the migrated model with the same optimizer), so a delivered recipe that departs from the source's is seen by no
parity check; here it is compared with the source directly. A departure is reported only where it changes what
training does in kind, each for its reason:

- **clipping off where the source clips**: the source's ``max_grad_norm`` > 0 and the delivered clip norm ≤ 0 (the
  target clips only at a positive norm; 0 computes the norm and leaves the gradient as it is) — a loss spike the
  source's recipe cuts goes straight into the weights;
- **Adam's epsilon orders of magnitude above the source's** (more than ``EPS_FACTOR``, an Adam-family optimizer):
  Adam divides each moment by √v + ε; an ε far above the source's, where √v of a fine-tuning gradient is ~1e-3 to
  1e-6, divides the update by ε instead and the weights barely move. Values within three decades of the source's
  (1e-8 against 1e-6 or 1e-5, all in use) are a choice, not a defect;
- **weight decay where the source decays nothing**: the source's ``weight_decay`` is 0 and the delivered one is not
  (an error against the source's own zero; a warning against the HF Trainer's default, a value the user may choose;
  which parameters it reaches is the next check's);
- **decay on parameters the source's recipe never decays** (``decay_group_findings``, any delivered decay > 0):
  the HF Trainer exempts biases and normalisation weights whatever its value (``Trainer.get_decay_parameter_names``);
  which parameters the target decays is read from the optimizer its own trainer builds for the delivered config
  (``probes/decay_groups.py``), not from its argument names. The real MindSpeed-MM snapshot defines
  ``training.no_decay_modules`` / ``no_decay_params`` but its ``Trainer.get_optimizer`` does not pass them on, and the
  stand-in has one group: there every parameter is decayed, and the probe's try of those fields says so.

- **the order the records are drawn in** (``data_order_findings``): the delivered sampler's ``shuffle`` against the
  order the source's training draws its records in (``training_recipe.source_data_order``: its scripts, its code,
  else the HF Trainer's own ``RandomSampler``); G4's training parity draws both sides from the delivered loader.
- **parts frozen that the source trains** (``freeze_findings``): the delivered ``model.freeze`` against what the
  source's training trains (``trained_parts.source_trained_parts``: every parameter, where its code freezes none and
  the HF Trainer's optimizer takes every parameter that requires a gradient); G4 steps both sides with the delivered
  trainable set.

The delivered value of a knob is the YAML's, else the target schema's default; a knob the target does not define,
or one the source's recipe does not state, is not compared (``examined`` says what was).
"""

from __future__ import annotations

import re
from typing import Any

from msmigrate.tools.yaml_validator.patterns import frozen_parts

EPS_FACTOR = 1e3
HF_DEFAULT = "the HF Trainer's default"  # training_recipe's ``where`` for a knob the source itself does not state
# the target's names for each knob of the source's recipe (HF TrainingArguments' names on the right)
TARGET_NAMES = {"max_grad_norm": re.compile(r"^(clip_grad|max_grad_norm|grad_clip|clip_grad_norm)$"),
                "adam_epsilon": re.compile(r"^(adam_eps|adam_epsilon|eps)$"),
                "weight_decay": re.compile(r"^weight_decay$")}


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def delivered_knobs(training: dict[str, Any], defaults: dict[str, Any]) -> dict[str, tuple[str, float, bool]]:
    """knob -> (the target's key, its delivered value, set by the YAML) over the YAML's keys and the schema's
    defaults (``defaults``: training field -> default)."""
    out = {}
    for knob, name in TARGET_NAMES.items():
        for key in [*training, *defaults]:
            if name.match(str(key)):
                in_yaml = key in training
                value = _num(training[key] if in_yaml else defaults.get(key))
                if value is not None:
                    out[knob] = (str(key), value, in_yaml)
                break
    return out


def departures(training: dict[str, Any], defaults: dict[str, Any],
               recipe: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the delivered knobs that depart from the source's recipe, the knobs compared)."""
    if not recipe.get("basis"):
        return [], []
    src, where = recipe["values"], recipe["where"]
    optimizer = str(training.get("optimizer", defaults.get("optimizer", "adamw")) or "")
    out, examined = [], []
    for knob, (key, value, in_yaml) in delivered_knobs(training, defaults).items():
        if knob not in src:
            continue
        if knob == "adam_epsilon" and "adam" not in optimizer.lower():
            continue
        examined.append(key)
        s = src[knob]
        why = None
        if knob == "max_grad_norm" and s > 0 >= value:
            why = (f"no clipping ({key} {value:g}: the norm is computed and the gradient left as it is) where the "
                   f"source's recipe clips the global gradient norm at {s:g}")
        elif knob == "adam_epsilon" and s > 0 and value > s * EPS_FACTOR:
            why = (f"Adam's epsilon {value:g} is {value / s:.0e} times the source's {s:g}: each update is divided by "
                   f"about epsilon instead of the gradient's own scale, so the weights barely move")
        elif knob == "weight_decay" and s == 0 and value > 0:
            why = f"weight decay {value:g} where the source's recipe decays none"
        if why:
            out.append({"knob": knob, "key": key, "value": value, "source_value": s, "where": where[knob],
                        "in_yaml": in_yaml, "why": why})
    return out, examined


def recipe_findings(delivered: dict[str, Any], defaults: dict[str, Any], recipe: dict[str, Any],
                    config: str) -> list[dict[str, Any]]:
    """G3's findings: each departure, naming the key, the source's value and where the source states it. An error,
    except weight decay against a source that states none of its own (the HF Trainer's default 0 stands in for it):
    a decay the user chose is no defect of the migration there, so it is a warning that says what it decays."""
    training = delivered.get("training") if isinstance(delivered.get("training"), dict) else {}
    found, _ = departures(training, defaults, recipe)
    return [{"severity": "warning" if d["knob"] == "weight_decay" and d["where"] == HF_DEFAULT else "error",
             "code": "optimizer-recipe", "path": f"training.{d['key']}", "value": d["value"],
             "source_value": d["source_value"],
             "message": f"{d['why']} ({recipe['basis']}: {d['knob']} {d['source_value']:g}, {d['where']}); set "
                        f"training.{d['key']}: {d['source_value']:g} in {config} as the source trains"}
            for d in found]


DECAY_FIX_SHOWN = 6  # folded parameter names a finding quotes


def _listing(values: list[str]) -> str:
    return "[" + ", ".join(values) + "]"


def decay_group_findings(delivered: dict[str, Any], defaults: dict[str, Any], recipe: dict[str, Any], config: str,
                         probe: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(G3's findings, the record) for the parameters the target's optimizer decays that the source's recipe never
    decays. ``probe()``: the decay-groups probe's result (``target_checks.decay_groups_check``), run only where
    there is something to compare: a delivered weight decay > 0 and a source whose decay rule is the HF Trainer's."""
    training = delivered.get("training") if isinstance(delivered.get("training"), dict) else {}
    knob = delivered_knobs(training, defaults).get("weight_decay")
    if knob is None or knob[1] <= 0:
        return [], {"examined": False, "why_not": "the delivered weight decay is 0: nothing is decayed"}
    key, value, _ = knob
    if not recipe.get("basis") or not recipe.get("no_decay"):
        return [], {"examined": False, "why_not": recipe.get("no_decay_why_not") or recipe.get("why_not")
                    or "the source's decay groups are not read"}
    result = probe() or {"examined": False, "why_not": "the decay-groups probe did not run"}
    record = {k: result.get(k) for k in ("examined", "why_not", "compared", "source_decayed", "target_decayed",
                                         "extra_count", "candidate", "exempting_fields") if k in result}
    if not result.get("examined") or not result.get("extra"):
        return [], record
    extra = result["extra"]
    shown = ", ".join(f"{e['name']} ({e['held_by']})" for e in extra[:DECAY_FIX_SHOWN])
    more = f", and {len(extra) - DECAY_FIX_SHOWN} more kinds" if len(extra) > DECAY_FIX_SHOWN else ""
    source_value = recipe["values"].get("weight_decay", 0.0)
    what = (f"the target's optimizer (its trainer's get_optimizer for this config) decays {result['extra_count']} "
            f"parameter(s) at {key} {value:g} that the source's recipe never decays ({recipe['basis']}: "
            f"{recipe['no_decay']}): {shown}{more}")
    candidate, fields = result.get("candidate") or {}, result.get("exempting_fields") or {}
    if candidate.get("removes"):
        settings = " and ".join(f"training.{k}: {_listing(v)}" for k, v in candidate["set"].items())
        path, fix = (f"training.{next(iter(candidate['set']))}",
                     f"set {settings} in {config} (tried: the target's optimizer then decays exactly what the "
                     "source's recipe decays)")
    else:
        tried = (f"its training fields {', '.join(fields)} do not change them (tried: "
                 + "; ".join(f"{k}: {_listing(v)}" for k, v in (candidate.get("set") or {}).items())
                 + "; its optimizer still decays them)" if fields else
                 "its training arguments have no field that exempts a parameter from decay")
        path, fix = (f"training.{key}",
                     f"the target's trainer puts them in its decayed group whatever the YAML says ({tried}): set "
                     f"training.{key}: 0 in {config} (the source's recipe: {source_value:g}, "
                     f"{recipe['where'].get('weight_decay')}), or exempt them in the trainer's optimizer "
                     "construction")
    return [{"severity": "error", "code": "optimizer-decay-groups", "path": path, "value": value,
             "source_value": source_value, "message": f"{what}; {fix}"}], record


def data_order_findings(delivered: dict[str, Any], order: dict[str, Any], config: str) -> list[dict[str, Any]]:
    """The delivered sampler's order (``data.dataloader_param.shuffle``, a bool the YAML sets) against the order the
    source's training draws its records in (``training_recipe.source_data_order``): records in file order — the same
    order every epoch and every run, batches that follow however the file was sorted — where the source draws them
    shuffled is a departure in kind, and so is shuffling a source that trains in its file's order (a curriculum). No
    parity gate sees it: both sides of G4's comparison draw from the delivered loader."""
    data = delivered.get("data") if isinstance(delivered.get("data"), dict) else {}
    loader = data.get("dataloader_param") if isinstance(data.get("dataloader_param"), dict) else {}
    value, source = loader.get("shuffle"), order.get("shuffled")
    if not isinstance(value, bool) or not isinstance(source, bool) or value == source:
        return []
    said = ("draws the records in file order — the same order every epoch and every run, each batch as the file "
            "happens to be sorted — where the source's training draws them shuffled") if source else \
        "shuffles the records where the source's training draws them in its file's order"
    return [{"severity": "error", "code": "data-order-recipe", "path": "data.dataloader_param.shuffle",
             "value": value, "source_value": source,
             "message": f"data.dataloader_param.shuffle is {str(value).lower()}: the sampler {said} ({order['where']});"
                        f" set data.dataloader_param.shuffle: {str(source).lower()} in {config} as the source trains"}]


def freeze_findings(delivered: dict[str, Any], trained: dict[str, Any], config: str) -> list[dict[str, Any]]:
    """The delivered ``model.freeze`` (a list of module names, or a mapping whose true entries are) against what the
    source's training trains (``trained_parts.source_trained_parts``): a frozen part where the source trains every
    parameter trains another set of parameters from the first update on. Nothing is compared where the source decides
    what trains itself (``all`` None)."""
    frozen = list(frozen_parts(delivered))
    if not frozen or trained.get("all") is not True:
        return []
    return [{"severity": "error", "code": "freeze-recipe", "path": "model.freeze", "value": frozen,
             "source_value": [],
             "message": f"model.freeze freezes {', '.join(frozen)}, which the source's training trains "
                        f"({trained['where']}): the run trains another set of parameters than the source from the "
                        f"first update on; set model.freeze: [] in {config} as the source trains"}]
