"""Pattern audit: every module pattern in the YAML must select real modules of the built model (contract §5.1, §6,
§13 #25-#29). The target raises only when *all* ``apply_modules`` patterns miss; one dead pattern among live ones is
silent (that sub-tree is simply not sharded separately), and a ``freeze`` pattern that misses is never reported.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from msmigrate.tools.module_match import compile_pattern
from msmigrate.tools.module_plan import holds_part_of_a_tie
from msmigrate.tools.yaml_validator.findings import Finding
from msmigrate.tools.yaml_validator.semantics import get


@dataclass
class ModuleTree:
    """The built model's module structure, as the module-tree probe reports it (model built on the meta device).

    - ``names``: every ``named_modules()`` name in traversal order; the root is ``""``.
    - ``classes``: name → class name (``type(module).__name__``), e.g. ``"model.layers.0": "Qwen2DecoderLayer"``.
    - ``no_split_modules``: the model's ``_no_split_modules`` class names (the blocks FSDP should wrap one by one).
    - ``accepts_past_key_values``: class name → whether its ``forward`` accepts ``past_key_values`` (named or via
      ``**kwargs``); the recompute wrapper always passes ``past_key_values=None``.
    - ``past_key_values_renamed``: class name → the parameter a decorator renames ``past_key_values`` to, where the
      block's caller fills it by position (so the wrapper's keyword gives it twice; those classes accept none).
    - ``tied_parameters``: groups of parameter names that are one Parameter in the built model; a block holding part
      of a group cannot be an FSDP unit of its own (FSDP2 refuses one parameter in two units).
    """

    names: list[str]
    classes: dict[str, str] = field(default_factory=dict)
    no_split_modules: list[str] = field(default_factory=list)
    accepts_past_key_values: dict[str, bool] = field(default_factory=dict)
    past_key_values_renamed: dict[str, str] = field(default_factory=dict)
    tied_parameters: list[list[str]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "ModuleTree":
        return cls(names=list(raw.get("names", [])), classes=dict(raw.get("classes", {})),
                   no_split_modules=list(raw.get("no_split_modules") or []),
                   accepts_past_key_values=dict(raw.get("accepts_past_key_values", {})),
                   past_key_values_renamed=dict(raw.get("past_key_values_renamed") or {}),
                   tied_parameters=[list(g) for g in raw.get("tied_parameters") or []])


# (YAML path, enabling switch or None = always active). Disabled features are not applied, so dead patterns there
# cannot break a run; they are still reported, as warnings.
PATTERN_LISTS = (
    ("parallel.fsdp_plan.apply_modules", None),
    ("parallel.fsdp_plan.ignored_modules", None),
    ("parallel.fsdp_plan.hook_modules", None),
    ("features.recompute_plan.apply_modules", "features.recompute"),
    ("model.freeze", None),
    ("features.activation_offload_plan.apply_modules", "features.enable_activation_offload"),
    ("features.chunkmbs_plan.apply_modules", "features.enable_chunk_mbs"),
    ("parallel.ep_plan.apply_modules", None),
)
# Plans of a parallelism that is off are never applied (expert parallel size 1: no ep_plan): not audited at all.
PARALLELISM_SIZE = {"parallel.ep_plan.apply_modules": "parallel.expert_parallel_size"}


def frozen_parts(data: Any) -> tuple[str, ...]:
    """What a YAML's model.freeze freezes: a list of module names, or a mapping whose true entries are."""
    said = get(data, "model.freeze") if isinstance(data, dict) else None
    if isinstance(said, dict):
        return tuple(str(k) for k, v in said.items() if v)
    if isinstance(said, (list, tuple)):
        return tuple(str(v) for v in said if v)
    return (str(said),) if isinstance(said, str) and said else ()


def _parallelism_off(data: dict, list_path: str) -> bool:
    size_key = PARALLELISM_SIZE.get(list_path)
    if size_key is None:
        return False
    size = get(data, size_key)
    return not isinstance(size, int) or size <= 1


def _patterns(data: dict, path: str) -> list[tuple[int, str]]:
    value = get(data, path)
    if not isinstance(value, list):
        return []
    return [(i, p) for i, p in enumerate(value) if isinstance(p, str)]


def _matches(pattern: str, names: list[str]) -> list[str]:
    return [n for n in names if compile_pattern(pattern).matches(n)]


def pattern_syntax_checks(data: dict) -> list[Finding]:
    """Without a module tree: every pattern of every plan must at least compile (the framework fails on it only
    when it applies the plan, deep into a launch)."""
    out: list[Finding] = []
    for list_path, _ in PATTERN_LISTS:
        for i, pattern in _patterns(data, list_path):
            try:
                compile_pattern(pattern)
            except ValueError as exc:
                out.append(Finding("error", "pattern-invalid", f"{list_path}[{i}]", f"pattern {pattern!r}: {exc}",
                                   "braces hold only `*` or a digit range `a-b`"))
    return out


def pattern_checks(data: dict, tree: ModuleTree) -> list[Finding]:
    out: list[Finding] = []
    selected: dict[str, set[str]] = {}
    for list_path, switch in PATTERN_LISTS:
        if _parallelism_off(data, list_path):
            selected[list_path] = set()
            continue
        enabled = switch is None or get(data, switch) is True
        chosen: set[str] = set()
        for i, pattern in _patterns(data, list_path):
            path = f"{list_path}[{i}]"
            try:
                hits = _matches(pattern, tree.names)
            except ValueError as exc:
                out.append(Finding("error", "pattern-invalid", path, f"pattern {pattern!r}: {exc}",
                                   "braces hold only `*` or a digit range `a-b`"))
                continue
            if not hits:
                near = _nearest_names(pattern, tree.names)
                out.append(Finding("error" if enabled else "warning", "pattern-no-match", path,
                                   f"pattern {pattern!r} matches no module of the built model (names are full dotted "
                                   "paths from the root; `{*}` is one run of digits)",
                                   ("closest module names: " + ", ".join(near)) if near else None))
            chosen.update(hits)
        selected[list_path] = chosen

    fsdp = selected["parallel.fsdp_plan.apply_modules"]
    if fsdp and tree.no_split_modules:
        for cls_name in tree.no_split_modules:
            instances = [n for n in tree.names if tree.classes.get(n) == cls_name]
            missed = [n for n in instances if n not in fsdp and not holds_part_of_a_tie([n], tree.tied_parameters)]
            if missed:
                out.append(Finding("error", "no-split-uncovered", "parallel.fsdp_plan.apply_modules",
                                   f"{len(missed)} of {len(instances)} `{cls_name}` blocks (listed in "
                                   f"_no_split_modules) are not selected by any apply_modules pattern, e.g. {missed[0]}",
                                   f"add a pattern such as `{_generalise(missed[0])}`"))

    if get(data, "features.recompute") is True:
        for i, pattern in _patterns(data, "features.recompute_plan.apply_modules"):
            try:
                hits = _matches(pattern, tree.names)
            except ValueError:
                continue
            bad = sorted({tree.classes[n] for n in hits
                          if n in tree.classes and tree.accepts_past_key_values.get(tree.classes[n]) is False})
            renamed = {c: tree.past_key_values_renamed[c] for c in bad if c in tree.past_key_values_renamed}
            if renamed:
                out.append(Finding("error", "recompute-rejects-past-key-values",
                                   f"features.recompute_plan.apply_modules[{i}]",
                                   f"pattern {pattern!r} selects {', '.join(renamed)} whose forward takes "
                                   f"`past_key_values` as {', '.join(sorted(set(renamed.values())))!r} (a renaming "
                                   "decorator) while its caller passes that by position; the recompute wrapper's "
                                   "`past_key_values=None` gives it twice (`forward() got multiple values for "
                                   "argument`)", "leave those blocks out of recompute_plan"))
            elif bad:
                out.append(Finding("error", "recompute-rejects-past-key-values",
                                   f"features.recompute_plan.apply_modules[{i}]",
                                   f"pattern {pattern!r} selects {', '.join(bad)} whose forward does not accept "
                                   "`past_key_values`; the recompute wrapper passes it (`forward() got an unexpected "
                                   "keyword argument 'past_key_values'`)",
                                   "recompute decoder layers / vision blocks (forward with **kwargs) instead"))

    frozen = selected["model.freeze"]
    top = [n for n in tree.names if n and "." not in n]
    if frozen and ("" in frozen or (top and all(n in frozen for n in top))):
        out.append(Finding("error", "weakened-all-frozen", "model.freeze",
                           "the freeze patterns select every top-level sub-module: nothing would train",
                           "freeze only the parts the baseline freezes (e.g. model.visual)"))
    elif frozen:
        out.extend(_blocks_all_frozen(frozen, tree))
    return out


def _blocks_all_frozen(frozen: set[str], tree: ModuleTree) -> list[Finding]:
    """Every transformer block of every tower (the instances of the ``_no_split_modules`` classes) frozen: what
    trains is at most a head, an embedding or a connector, while the source's training (the HF Trainer's, or its own
    code's, neither of which freezes a whole model) trains the blocks. Freezing one tower (the vision encoder) is a
    common, legitimate choice and is not reported."""
    def is_frozen(name: str) -> bool:
        parts = name.split(".")
        return any(".".join(parts[:i]) in frozen for i in range(1, len(parts) + 1))

    towers = {c: [n for n in tree.names if tree.classes.get(n) == c] for c in tree.no_split_modules}
    towers = {c: names for c, names in towers.items() if names}
    if not towers or not all(is_frozen(n) for names in towers.values() for n in names):
        return []
    trains = [n for n in tree.names if n and "." not in n and not is_frozen(n)]
    return [Finding("error", "weakened-all-blocks-frozen", "model.freeze",
                    f"the freeze patterns freeze every block of every tower ({', '.join(sorted(towers))}: "
                    f"{sum(map(len, towers.values()))} blocks); only {', '.join(trains) or 'modules outside them'} "
                    "would train, where the source's training trains the blocks",
                    "freeze only the tower the source's training freezes (e.g. model.visual), not its parent")]


def _generalise(name: str) -> str:
    """``model.layers.7`` → ``model.layers.{*}``: digits-only segments become ``{*}``."""
    return ".".join("{*}" if part.isdigit() else part for part in name.split("."))


def _nearest_names(pattern: str, names: list[str]) -> list[str]:
    generalised = sorted({_generalise(n) for n in names if n})
    return difflib.get_close_matches(pattern, generalised, n=3, cutoff=0.5)
