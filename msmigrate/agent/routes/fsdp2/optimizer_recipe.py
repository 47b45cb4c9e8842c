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
- **weight decay where the source decays nothing**: the source's ``weight_decay`` is 0 and the delivered one is not:
  every parameter the target's optimizer holds is decayed, norms and biases included, which the source's recipe
  never does (with a source decay > 0 the HF Trainer still exempts biases and normalisation weights; whether the
  target's parameter groups do is not decided here).

The delivered value of a knob is the YAML's, else the target schema's default; a knob the target does not define,
or one the source's recipe does not state, is not compared (``examined`` says what was).
"""

from __future__ import annotations

import re
from typing import Any

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
            why = (f"weight decay {value:g} on every parameter the target's optimizer holds (norms and biases "
                   f"included) where the source's recipe decays none")
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
