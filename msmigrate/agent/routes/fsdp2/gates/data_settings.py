"""G2's own test of whether a data failure is the YAML's: the data path fails parity with the YAML as delivered; the
same check is run once more with the YAML's data settings that differ from what this migration derives for them
(the config phase's draft from the plan, the example and the records: ``draft_config``) set as derived. Passing
then, the cause is those settings (config), and the gate says which key to set to what, in the words the classify
node reads as the gate's remedy (knowledge/failure_context.py, ``gate_remedy_owner``). Failing as well (or no
setting differs), the data settings are not the cause; the gate records which of them are as derived, so a case that
blames one of those (a role tag the records contradict) is not sent to a YAML that already says what the records'
own first sample says (the classify node: ``derived_settings_owner``).

Paths (the records, their folder, the model folder, caches) are the inputs the gates bind, not settings to derive:
left out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from msmigrate.agent.routes.fsdp2.draft_config import draft_config, load_baseline
from msmigrate.knowledge.failure_context import scalar_leaves
from msmigrate.tools import yaml_roundtrip as rt
from msmigrate.tools.launcher.command import materialize_config

# leaves that name inputs (bound per run) or where things are written, not settings a migration derives
_INPUT_LEAVES = ("dataset", "dataset_dir", "model_name_or_path", "cache_dir", "max_samples", "output_dir")


def compare_data_settings(delivered: dict[str, Any], derived: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """({dotted key: (delivered value, derived value)} for the data settings that differ, [keys that are as
    derived]), over the ``data.`` leaves the derived section names, inputs left out; a leaf the delivered YAML does
    not set there differs with the value ``MISSING`` (a key written at another level, say: the target then reads
    its default)."""
    ours, theirs = scalar_leaves(delivered.get("data"), "data"), scalar_leaves(derived.get("data"), "data")
    differ, same = {}, []
    for dotted in sorted(theirs):
        if dotted.rsplit(".", 1)[-1] in _INPUT_LEAVES or theirs[dotted] is None:
            continue
        if dotted in ours and ours[dotted] == theirs[dotted]:
            same.append(dotted)
        else:
            differ[dotted] = (ours.get(dotted, MISSING), theirs[dotted])
    # a leaf the delivered YAML adds to a section the derived one writes (a pasted `videos:` under attr): unset as
    # derived (None is the target's "not given")
    sections = {d.rsplit(".", 1)[0] for d in theirs}
    for dotted in sorted(set(ours) - set(theirs)):
        if dotted.rsplit(".", 1)[0] in sections and ours[dotted] is not None and \
                dotted.rsplit(".", 1)[-1] not in _INPUT_LEAVES:
            differ[dotted] = (ours[dotted], None)
    return differ, same


MISSING = "<not set>"


def derived_data(deps: Any, state: dict[str, Any]) -> dict[str, Any] | None:
    """The data section this migration derives (the draft from the plan and the most similar example that is not
    the delivered YAML itself: a verify run on a finished migration finds that one most similar); None when no such
    example is in the target."""
    plan, ctx = state["plan"], deps.ctx
    ranked = [c.get("example") for c in (state.get("target_summary") or {}).get("similar_cases") or []
              if isinstance(c, dict)]
    examples = [e for e in dict.fromkeys([plan.get("similar_case"), *ranked]) if e and e != plan.get("config_path")]
    if not examples:
        return None
    try:
        baseline, _, _ = load_baseline(ctx.target, examples[0])
    except FileNotFoundError:
        return None
    cfg = draft_config(plan, baseline, source=ctx.source, data_json=ctx.data_path, tree={})
    return yaml.safe_load(rt.dump(cfg))  # plain Python values (the round trip's scalars are its own types)


def settings_check(deps: Any, state: dict[str, Any], config: Path, run_check: Any) -> dict[str, Any]:
    """``{"differ": …, "same": …, "passes_as_derived": bool | None, "problems": [...]}`` for a failed G2 on
    ``config``: ``run_check(path)`` runs the gate's data check on another YAML and says whether it passes (problems
    empty). ``problems`` holds the remedy line when the derived settings pass."""
    try:
        delivered = yaml.safe_load(Path(config).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    derived = derived_data(deps, state)
    if not isinstance(delivered, dict) or derived is None:
        return {}
    differ, same = compare_data_settings(delivered, derived)
    record: dict[str, Any] = {"differ": {k: list(v) for k, v in differ.items()}, "same": same,
                              "passes_as_derived": None, "problems": []}
    if not differ:
        return record
    dest = deps.ctx.run_dir / "probes" / f"g2_as_derived_{Path(config).name}"
    path, _ = materialize_config(Path(config), {k: v[1] for k, v in differ.items()}, dest)
    record["passes_as_derived"] = passed = run_check(path)
    if passed:
        config_name = state["plan"].get("config_path") or Path(config).name
        sets = "; ".join(f"remove `{k}` (it is {v[0]!r}; this migration derives no such key)" if v[1] is None else
                         f"set `{k}` to {v[1]!r} (it is {'not set there' if v[0] == MISSING else repr(v[0])})"
                         for k, v in differ.items())
        record["problems"] = [f"data settings: the same check passes with the YAML's data settings that differ from "
                              f"what this migration derives set as derived: {sets} in {config_name}"]
    return record
